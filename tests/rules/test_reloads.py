"""The widening classifier: a change it lets through silently never loosens any verdict."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.rules import Action, IntentFacts, PolicyStore, resolve_with_policy
from core.rules.model import more_restrictive
from tests.rules.support import HOME, Layout

ACTIONS = st.sampled_from(["allow", "deny", "ask"])
PATTERNS = st.sampled_from(["*", "a*", "*b", "ab", "a", "b*a"])
SURFACE_VALUE = st.one_of(ACTIONS, st.dictionaries(PATTERNS, ACTIONS, max_size=4))
PERMISSION = st.dictionaries(st.sampled_from(["bash", "path", "path_read", "*"]), SURFACE_VALUE, max_size=2)
DOCUMENT = st.one_of(
    st.builds(lambda p: {"permission": p}, PERMISSION),
    st.builds(lambda p, y: {"permission": p, "yoloMode": y}, PERMISSION, st.booleans()),
    st.just("{ not json"),
)
VALUES = ["", "a", "b", "ab", "ba", "aab", "x"]


def _verdicts(store: PolicyStore) -> dict[tuple[str, str, str], Action]:
    policy = store.policy("Explore")
    return {
        ("Explore", surface, value): resolve_with_policy(policy, IntentFacts(surface, (value,))).verdict
        for surface in ("bash", "path_read", "path_write", "read")
        for value in VALUES
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lower=PERMISSION, before=DOCUMENT, after=DOCUMENT)
@example(lower={"bash": {"a*": "deny"}}, before={"permission": {}},
         after={"permission": {"bash": {"*": "ask"}}})  # a new ask overrides a lower deny
@example(lower={"path_read": {"a*": "deny", "*": "allow"}}, before={"permission": {"path": {"*": "allow"}}},
         after={"permission": {}})  # a family key removed reorders pi's folded reading: held
def test_a_change_applied_without_review_never_loosens_a_verdict(
    tmp_path_factory: object, lower: dict[str, object], before: object, after: object
) -> None:
    from pytest import TempPathFactory

    assert isinstance(tmp_path_factory, TempPathFactory)
    layout = Layout(tmp_path_factory.mktemp("reload"))
    layout.write_global({"permission": lower})
    path = layout.project_config

    def write(document: object) -> None:
        layout.write(path, document if isinstance(document, str) else json.dumps(document))

    write(before)
    store = PolicyStore(layout.agent_dir, layout.project, None, home=HOME)
    old = _verdicts(store)
    write(after)
    os.utime(path, ns=(1, 1))  # a same-size rewrite is still noticed
    store.reload_if_changed()
    new = _verdicts(store)
    if store.pending():
        assert new == old  # held: the rules in force did not change
        return
    for key, verdict in new.items():
        assert not more_restrictive(old[key], verdict), (key, old[key], verdict, before, after)


def test_the_diff_names_every_change(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_project({"permission": {"bash": {"git *": "allow", "rm *": "deny", "curl *": "ask"}}})
    store = layout.store()
    layout.write_project({"yoloMode": True, "permission": {"bash": {"git *": "ask", "curl *": "ask",
                                                                     "npm *": "deny", "ls": "allow"}}})
    assert store.reload_if_changed() is False
    [pending] = store.pending()
    assert pending.diff_lines() == [
        "~ yoloMode: (unset) -> True  (widens)",
        "~ bash 'git *': allow -> ask",
        "- bash 'rm *': deny  (widens)",
        "+ bash 'npm *': deny",
        "+ bash 'ls': allow  (widens)",
    ]
