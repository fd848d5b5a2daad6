"""`log_safe`: every hidden character is escaped, whatever path the text takes (fast or per character)."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from core.text import escape_hidden, is_hidden, log_safe, none_hidden


def expected(text: str) -> str:
    """The rule, one character at a time: the app's hidden code points (`core.text`), newline, tab."""
    return "".join(
        "\\\\" if ch == "\\" else f"\\u{ord(ch):04x}" if ch in "\n\t" or is_hidden(ch) else ch
        for ch in text
    )


def test_every_code_point_alone_and_after_printable_text() -> None:
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        assert log_safe(ch, 1000) == expected(ch), hex(code)
    assert log_safe("git status\u202e.txt", 1000) == "git status\\u202e.txt"
    assert log_safe("a\\b\nc", 1000) == "a\\\\b\\u000ac"
    assert log_safe("nbsp\xa0vs\ufe0f", 1000) == "nbsp\\u00a0vs\\ufe0f"  # a lookalike space, a selector


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_matches_the_rule(text: str) -> None:
    assert log_safe(text, 10_000) == expected(text)


def test_a_cut_says_how_much_it_hid() -> None:
    assert log_safe("x" * 200, 20) == "x" * 15 + "…+185"


def test_a_log_line_hides_nothing_whatever_path_it_takes() -> None:
    """`escape_hidden` (every log line's last guard; its fast check skips the search for ignorable
    code points in ASCII text) agrees with the rule for every code point, alone and in a long line."""
    line = "request=r1.json agent=Explore surface=bash value=git status -> approved by=rule in 1.0ms; " * 64
    assert escape_hidden(line) == line and none_hidden(line)
    assert escape_hidden(line + "\u200b") == line + "\\u200b"
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        hidden = ch in "\n\t" or is_hidden(ch)
        assert none_hidden("git " + ch) is not hidden, hex(code)
        assert escape_hidden(ch) == (f"\\u{code:04x}" if hidden else ch), hex(code)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_log_line_matches_the_rule(text: str) -> None:
    assert escape_hidden(text) == "".join(
        f"\\u{ord(ch):04x}" if ch in "\n\t" or is_hidden(ch) else ch for ch in text
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["ab c", "\u2026", "\u2026+43", "\u200b", "\u034f", "\ufe0f", "\U000e0001",
                                 "é", "\u3164", "x" * 40]), max_size=40))
def test_a_line_with_cuts_is_checked_as_any_other(pieces: list[str]) -> None:
    """A line whose characters beyond ASCII are cut marks (`…`, a fail-safe reason cut in every answer)
    skips the search for ignorable code points; with any other beside them, it searches as before."""
    text = "".join(pieces)
    assert none_hidden(text) is all(not (ch in "\n\t" or is_hidden(ch)) for ch in text)
