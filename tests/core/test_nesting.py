"""The nesting check counts exactly what the decoder would recurse on, in C-speed passes (issue 34
finding 5): checked here against the decoded depth of random documents whose strings are full of
brackets, quotes and escapes, and against a character-by-character count on any text."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from core.wire.base import NestedTooDeeply, check_nesting, string_end

_TEXT = st.text(alphabet='[]{}"\\ax,:', max_size=12)
_JSON = st.recursive(
    st.none() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=40,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


def _refuses(text: str, limit: int) -> bool:
    try:
        check_nesting(text, limit)
    except NestedTooDeeply:
        return True
    return False


def _reference(text: str, limit: int) -> bool | None:
    """The former character-by-character count (strings skipped with their escapes); None when a
    backslash stands outside a string, where the decoder stops before any bracket after it."""
    depth, index = 0, 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            return None
        if char == '"':
            index = string_end(text, index)
            continue
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
        index += 1
    return False


@settings(max_examples=300, deadline=None)
@given(value=_JSON, chain=st.integers(0, 14), limit=st.integers(0, 12))
def test_a_document_is_refused_exactly_when_it_nests_deeper_than_the_limit(
        value: object, chain: int, limit: int) -> None:
    deep: object = value
    for _ in range(chain):
        deep = [deep, "]]\\\"[["]
    text = json.dumps(deep, ensure_ascii=False)
    assert _refuses(text, limit) == (_depth(deep) > limit)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='[]{}"\\a', max_size=40), limit=st.integers(0, 6))
def test_on_any_text_it_is_never_looser_than_counting_character_by_character(text: str, limit: int) -> None:
    if _reference(text, limit) is True:
        assert _refuses(text, limit)
