"""The wildcard matcher (`docs/design/contract.md` § Rules), and against the regex translation it replaced.

The oracle is the previous matcher's translation, kept here only: `*` runs become `.*`, `?` is
`.`, the rest is escaped, a trailing `" *"` becomes `(?: .*)?`, and the match is a DOTALL
`fullmatch`. Patterns and values come from a small alphabet so that matches are frequent.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.rules.evaluate import Candidates
from core.rules.matcher import compile_wildcard, expand_home
from core.rules.model import make_rule

HOME = "/home/me"


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("~", HOME),
        ("$HOME", HOME),
        ("${HOME}", HOME),
        ("~/.ssh/*", "/home/me/.ssh/*"),
        ("$HOME/dev/*", "/home/me/dev/*"),
        ("${HOME}/dev", "/home/me/dev"),
        ("~\\x", "/home/me/x"),
        ("~/dir/", "/home/me/dir/"),
        # node's path.join: the rest is appended after a `/` and normalised, never restarted at `/`.
        ("~//.ssh/*", "/home/me/.ssh/*"),
        ("$HOME//.ssh/*", "/home/me/.ssh/*"),
        ("${HOME}//x", "/home/me/x"),
        ("~\\/.ssh/*", "/home/me/.ssh/*"),
        ("$HOME\\/.ssh/*", "/home/me/.ssh/*"),
        ("$HOME/build\\", "/home/me/build\\"),
        ("~/a/./b/../c", "/home/me/a/c"),
        ("~/../../../x", "/x"),
        ("~/", "/home/me"),
        ("~\\", "/home/me"),
        ("~/..", "/home"),
        ("~user/x", "~user/x"),
        ("$HOMEDIR/x", "$HOMEDIR/x"),
        ("/abs/~/x", "/abs/~/x"),
    ],
)
def test_home_expansion(text: str, expanded: str) -> None:
    assert expand_home(text, HOME) == expanded


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("git *", "git", True),
        ("git *", "git status", True),
        ("git *", "gitx", False),
        ("git*", "gitx", True),
        ("a?c", "abc", True),
        ("a?c", "ac", False),
        ("*", "", True),
        ("src/**", "src/a/b.ts", True),
        ("src/*", "src/a\nb", True),
        ("a.c", "abc", False),
        ("(x)+[y]", "(x)+[y]", True),
        ("Git *", "git status", False),
        ("git status", "git status ", False),
        ("rm -rf *", "rm -rf", True),
        ("*.env", "a.env.local", False),
    ],
)
def test_wildcard(pattern: str, value: str, matches: bool) -> None:
    assert compile_wildcard(pattern, HOME).matches(value) is matches


def test_pattern_home_is_expanded_only_when_asked() -> None:
    assert compile_wildcard("~/x", HOME).matches("/home/me/x")
    assert not compile_wildcard("~/x").matches("/home/me/x")


@settings(max_examples=300, deadline=None)
@given(
    patterns=st.lists(st.text(alphabet="ab*? ", min_size=1, max_size=5), min_size=1, max_size=8),
    value=st.text(alphabet="ab ", max_size=6),
)
def test_index_agrees_with_rule_by_rule_last_match(patterns: list[str], value: str) -> None:
    rules = [make_rule("bash", p, "allow", origin="global", layer="config", home=HOME)
             for p in patterns]
    expected = max((i for i, r in enumerate(rules) if r.pattern_wildcard.matches(value)), default=-1)
    assert Candidates(rules).last_index(value) == expected
    assert Candidates(rules[:-1]).with_tail(rules[-1:]).last_index(value) == expected


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
