"""`log_safe`: every hidden character is escaped, whatever path the text takes (fast or per character)."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from core.text import is_hidden, log_safe


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
