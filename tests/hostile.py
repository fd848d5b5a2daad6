"""Hostile strings a child can put in any field: escapes, controls, bidi, zero-width, markup, surrogates."""

from __future__ import annotations

from hypothesis import strategies as st

from core.text import is_hidden

PIECES = [
    "\x1b[31m", "\x1b[2J", "\x1b]0;owned\x07", "\x1b]8;;https://evil.example\x1b\\", "\x9b2J", "\x9d0;t\x9c",
    "\r", "\x08", "\x00", "\x7f", "\x85", "\x0b\x0c", "\n", "\t",
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
    "\u200b", "\u200c", "\u200d", "\ufeff", "\u2060", "\xa0", "\u3164", "\ufe0f", "\U000e0041",
    "[bold]", "[/]", "[link=https://evil.example]", "[@click=app.quit]", "\ud800", "e\u0301\u0301\u0301",
    "rm -rf ~", "/etc/passwd", "ls", "\\u202e", "x" * 300,
]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), min_size=1, max_size=10).map(
    "".join
)
"""One hostile string: pieces from `PIECES` and any code points, joined."""

ESCAPE_MARKS = ("\\u", "⟨U+", "␛", "⏎", "⇥")
"""How an escaped hidden code point shows: `\\uXXXX` in log lines and tables, a token or a mark (newline,
tab) in the app and in `explain`."""


def raw_hidden(text: str) -> list[str]:
    """Hidden code points (and tabs) that reached the output as themselves; lines may break."""
    return [f"U+{ord(c):04X}" for c in text if c == "\t" or (c != "\n" and is_hidden(c))]


def hides(text: str) -> bool:
    """Whether `text` holds anything that must show escaped."""
    return any(c in "\n\t" or is_hidden(c) for c in text)
