"""The wildcard matcher (`docs/contract.md` § Rules)."""

from __future__ import annotations

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
