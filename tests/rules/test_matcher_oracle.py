"""The backtracking-free matcher against the regex translation it replaced (the oracle).

The oracle is the previous matcher's translation, kept here only: `*` runs become `.*`, `?` is
`.`, the rest is escaped, a trailing `" *"` becomes `(?: .*)?`, and the match is a DOTALL
`fullmatch`. Patterns and values come from a small alphabet so that matches are frequent.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from core.rules.matcher import compile_wildcard

_ALPHABET = "ab*? /.\n\\(\U0001f600"


def _oracle(pattern: str, value: str) -> bool:
    optional_tail = pattern.endswith(" *")
    body = pattern[:-2] if optional_tail else pattern
    parts: list[str] = []
    for char in body:
        if char == "*":
            if not parts or parts[-1] != ".*":
                parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    source = "".join(parts) + ("(?: .*)?" if optional_tail else "")
    return re.compile(source, re.DOTALL).fullmatch(value) is not None


@st.composite
def _pattern_and_value(draw: st.DrawFn) -> tuple[str, str]:
    """A pattern, and a value often built from it (each `*` and `?` filled in) so it may match."""
    pattern = draw(st.text(alphabet=_ALPHABET, max_size=12))
    if draw(st.booleans()):
        return pattern, draw(st.text(alphabet=_ALPHABET.replace("*", "").replace("?", ""), max_size=14))
    filler = st.text(alphabet="ab /\n\U0001f600", max_size=3)
    value = "".join(
        draw(filler) if char == "*" else draw(st.sampled_from("ab \U0001f600")) if char == "?" else char
        for char in pattern
    )
    if draw(st.booleans()) and value:
        index = draw(st.integers(0, len(value) - 1))
        value = value[:index] + draw(st.sampled_from(["", "a", "b "])) + value[index + 1 :]
    return pattern, value


@settings(max_examples=1500, deadline=None)
@given(_pattern_and_value())
def test_matcher_agrees_with_the_regex_oracle(case: tuple[str, str]) -> None:
    pattern, value = case
    assert compile_wildcard(pattern).matches(value) is _oracle(pattern, value), (pattern, value)


def test_adversarial_patterns_still_mean_the_same() -> None:
    for pattern, value in [
        ("*/secrets/*.pem", "/secrets/" * 50),
        ("*/secrets/*.pem", "/secrets/" * 50 + "k.pem"),
        ("*a*a*a*b", "a" * 60),
        ("*a*a*a*b", "a" * 60 + "b"),
        ("*a?a*a?b *", "aXa" * 20 + "aYb"),
    ]:
        assert compile_wildcard(pattern).matches(value) is _oracle(pattern, value), (pattern, value)
