"""A rule written from an ask never approves what a deny of any layer forbids (issue 34 finding 1):
the overlap of an allow with the rules in force is decided exactly (checked here against the real
matcher), `R` and the review refuse such a rule naming the deny, and an allow of the `--rules` file
never overrides a deny of another layer at judgment."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.history.rule_edit import apply, preview
from core.history.suggest import Suggestion, SuggestionRefused, suggestion_from_ask
from core.rules import IntentFacts, resolve_with_policy
from core.rules.matcher import compile_wildcard
from core.rules.overlap import UNDECIDED, common_value
from core.rules.trail import render_trail
from tests.rules.support import Layout, resolve

# Patterns over a tiny alphabet, so every value up to a few characters can be tried.
_PATTERN = st.text(alphabet="ab *?", max_size=5)
_VALUES = ["".join(t) for n in range(6) for t in itertools.product("ab x", repeat=n)]


def _matches(pattern: str, value: str) -> bool:
    return compile_wildcard(pattern).matches(value)


@settings(max_examples=300, deadline=None)
@given(allow=_PATTERN, deny=_PATTERN, later=st.lists(_PATTERN, max_size=2))
def test_the_overlap_decision_agrees_with_the_real_matcher(allow: str, deny: str, later: list[str]) -> None:
    found = common_value(allow, deny, later)
    assert found != UNDECIDED
    if found is not None:  # the value found is a real one: both match it, no later rule does
        assert _matches(allow, found) and _matches(deny, found)
        assert not any(_matches(p, found) for p in later)
    brute = next((v for v in _VALUES if _matches(allow, v) and _matches(deny, v)
                  and not any(_matches(p, v) for p in later)), None)
    if brute is not None:  # every common value the matcher knows of is found (no sampling)
        assert found is not None and len(found) <= len(brute)


@pytest.mark.parametrize(("allow", "deny", "example"), [
    ("git push *", "*--force*", "git push --force"),
    ("make *", "*rm -rf*", "make rm -rf"),
    ("a*c", "*b*", "abc"),  # missed by the former witness heuristic
])
def test_overlaps_the_witness_heuristic_missed_are_found(allow: str, deny: str, example: str) -> None:
    assert common_value(allow, deny) == example


def test_no_overlap_and_overlap_shadowed_by_a_later_rule() -> None:
    assert common_value("npm *", "git *") is None
    assert common_value("git push *", "*--force*", ["git push *"]) is None
    found = common_value("git push *", "*--force*", ["git push --force"])
    assert found is not None and found != "git push --force" and _matches("*--force*", found)


def _ask_rule(layout: Layout, rules_file: Path, value: str, child: str) -> Suggestion:
    return suggestion_from_ask(layout.store(rules_file), "bash", (value,), [("bash", child)], "Tester", 1.0)


@pytest.mark.parametrize(("deny", "value", "child", "example"), [
    ("*--force*", "git push origin feat", "git push *", "git push --force"),
    ("*rm -rf*", "make build", "make *", "make rm -rf"),
])
@pytest.mark.parametrize("layer", ["global", "project", "agent"])
def test_r_refuses_a_rule_that_would_approve_what_a_deny_of_any_layer_forbids(
        tmp_path: Path, layer: str, deny: str, value: str, child: str, example: str) -> None:
    layout = Layout(tmp_path)
    if layer == "global":
        source = layout.write_global({"permission": {"bash": {deny: "deny"}}})
    elif layer == "project":
        source = layout.write_project({"permission": {"bash": {deny: "deny"}}})
    else:
        source = layout.write_agent("Tester", f'permission:\n  bash:\n    "{deny}": deny\n')
    rules_file = tmp_path / "rules.json"
    with pytest.raises(SuggestionRefused) as refused:
        _ask_rule(layout, rules_file, value, child)
    assert repr(deny) in str(refused.value) and str(source) in str(refused.value)
    assert repr(example) in str(refused.value)
    # ... and `apply` refuses it too, whatever the caller offers.
    store = layout.store(rules_file)
    offer = Suggestion("bash", child, 1, ("Tester",), (value,), 1.0, from_child=True)
    with pytest.raises(SuggestionRefused, match="loosen an explicit deny"):
        apply(offer, rules_file, preview(offer, rules_file), rules=store)
    assert not rules_file.exists()


def test_a_deny_of_the_rules_file_passed_on_the_command_line_counts_too(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    rules_file = layout.write(tmp_path / "rules.json", {"permission": {"bash": {"*--force*": "deny"}}})
    with pytest.raises(SuggestionRefused, match=r"\*--force\*"):
        _ask_rule(layout, rules_file, "git push origin feat", "git push *")


def test_a_rule_no_deny_can_meet_is_offered(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*--force*": "deny", "npm *": "ask"}}})
    offer = _ask_rule(layout, tmp_path / "rules.json", "npm test", "npm test *")
    assert offer.pattern == "npm test *"


def test_an_allow_of_the_rules_file_never_overrides_a_deny_of_another_layer(tmp_path: Path) -> None:
    # The rule as the issue found it written (by hand, or by the former `R`): the deny still wins.
    layout = Layout(tmp_path)
    source = layout.write_global({"permission": {"bash": {"*": "ask", "*--force*": "deny"}}})
    rules_file = layout.write(tmp_path / "rules.json",
                              json.dumps({"permission": {"bash": {"git push *": "allow"}}}))
    store = layout.store(rules_file)
    denied = resolve(store, "bash", "git push --force origin main", agent="Tester")
    assert denied.verdict == "deny"
    assert denied.decided_by() == {"kind": "rule", "surface": "bash", "pattern": "*--force*",
                                   "origin": "global"}
    assert denied.rule is not None and denied.rule.source == str(source)
    lines = "\n".join(render_trail(denied.trail))
    assert "never overrides a deny of another layer" in lines
    allowed = resolve(store, "bash", "git push origin feat", agent="Tester")
    assert allowed.verdict == "allow" and allowed.rule is not None and allowed.rule.origin == "authorizer"
    # A deny the `--rules` file itself overrides by last match stays overridden (its own order).
    own = layout.write(tmp_path / "own.json", {"permission": {"bash": {"*": "deny", "ls": "allow"}}})
    assert resolve(layout.store(own), "bash", "ls", agent="Tester").verdict == "allow"


def test_a_grant_on_top_of_a_rules_file_allow_still_meets_the_deny(tmp_path: Path) -> None:
    from core.rules.session_grants import grant_rules
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*--force*": "deny"}}})
    rules_file = layout.write(tmp_path / "rules.json", {"permission": {"bash": {"git *": "allow"}}})
    policy = layout.store(rules_file).policy("Tester")
    facts = IntentFacts("bash", ("git push --force",))
    assert resolve_with_policy(policy, facts, grant_rules("bash", "git push *", "/home/me")).verdict == "deny"
