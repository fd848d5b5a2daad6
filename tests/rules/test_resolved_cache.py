"""The judgment reused for identical facts (`core.rules.resolver`) is exactly the judgment made afresh,
on both readings (ours and pi 20.7.3's), with and without session rules, and follows a reload."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.rules import IntentFacts, PolicyStore, Resolution, resolve_with_policy
from core.rules.resolver import MAX_RESOLVED_CHARS, resolve_uncached
from core.rules.session_grants import grant_rules
from core.wire.facts import AskingUnit
from tests.rules.support import HOME, Layout

#: Rules pi 20.7.3 reads otherwise (array-index keys first, `?` on UTF-16 units, families), a
#: floor, a deny with a reason and an agent file of its own.
GLOBAL = {"permission": {
    "bash": {"*": "ask", "git *": "allow", "42": "deny", "rm *": {"action": "deny", "reason": "no rm"}},
    "skill": {"*": "deny", "7": "allow"},
    "path": {"*": "ask", "/tmp/*": "allow"},
    "path_write": {"/etc/*": "deny"},
    "external_directory": {"*": "ask", "/cache/?": "allow"},
    "mcp": {"srv:*": "allow"},
    "read": {"~/*": "allow"},
}}
SURFACES = ("bash", "bash ", "skill", "path", "path_read", "path_write", "external_directory",
            "external_directory_read", "mcp", "read", " read", "write", "tool")
VALUES = st.text(alphabet="git rm42/7tmpec~?\U0001f600*.", max_size=12)
FLOORS = st.none() | st.sampled_from(["ask", "deny", ""])
UNITS = st.none() | st.lists(st.builds(AskingUnit, VALUES, FLOORS), min_size=1, max_size=3).map(tuple)
FACTS = st.builds(IntentFacts, st.sampled_from(SURFACES), st.lists(VALUES, max_size=3).map(tuple),
                  st.none() | VALUES, FLOORS, UNITS)


def _store(tmp: Path) -> PolicyStore:
    layout = Layout(tmp)
    layout.write_global(GLOBAL)
    layout.write_agent("Explore", "permission:\n  bash:\n    'ls *': allow\n")
    return layout.store()


def _same(cached: Resolution, fresh: Resolution) -> None:
    assert (cached.verdict, cached.surface, cached.outcome) == (fresh.verdict, fresh.surface, fresh.outcome)
    assert (cached.decision, cached.deny_reason) == (fresh.decision, fresh.deny_reason)
    assert cached.trail == fresh.trail


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(facts=FACTS, agent=st.sampled_from(["Explore", "other", ""]), granted=st.booleans())
def test_a_reused_judgment_is_the_fresh_one(
    tmp_path: Path, facts: IntentFacts, agent: str, granted: bool
) -> None:
    policy = _store(tmp_path).policy(agent)
    session = grant_rules("bash", "rm *", HOME) + grant_rules("path", "/etc/*", HOME) if granted else ()
    first = resolve_with_policy(policy, facts, session)
    again = resolve_with_policy(policy, facts, session)
    fresh = resolve_uncached(policy, facts, session)
    _same(first, fresh)
    _same(again, fresh)
    assert again is not first  # a value of its own: its trail is built for it
    # Other session rules (even equal ones) are judged with, never taken for the first ones.
    other = resolve_with_policy(policy, facts, grant_rules("bash", "*", HOME))
    _same(other, resolve_uncached(policy, facts, grant_rules("bash", "*", HOME)))


def test_a_reload_judges_with_the_new_rules(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "ask", "git *": "allow"}}})
    store = layout.store()
    facts = IntentFacts("bash", ("git status",))
    assert resolve_with_policy(store.policy("Explore"), facts).verdict == "allow"
    layout.write_global({"permission": {"bash": {"*": "ask", "git *": "deny"}}})  # narrows: applied
    assert store.reload_if_changed()
    assert resolve_with_policy(store.policy("Explore"), facts).verdict == "deny"


def test_large_facts_are_judged_each_time(tmp_path: Path) -> None:
    store = _store(tmp_path)
    facts = IntentFacts("bash", ("git " + "x" * MAX_RESOLVED_CHARS,))
    policy = store.policy("Explore")
    _same(resolve_with_policy(policy, facts), resolve_uncached(policy, facts))


def test_facts_with_a_long_floor_are_not_kept(tmp_path: Path) -> None:
    """The floor is a child's text too: facts whose floor alone is past the limit are judged each time,
    never kept (review4: the size counted every field but the floor, so 2,048 kept asks could hold a
    1 MiB floor each)."""
    from core.rules import resolver

    store = _store(tmp_path)
    facts = IntentFacts("bash", ("git status",), floor="x" * MAX_RESOLVED_CHARS)
    policy = store.policy("Explore")
    _same(resolve_with_policy(policy, facts), resolve_uncached(policy, facts))
    assert not any(key[1] == facts for key in list(resolver._RESOLVED))
