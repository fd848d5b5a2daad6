"""Serving-session grants, the refusal of grants that would shadow a deny, and the order of authority:
a config deny > this node's session grant > a config ask (issue 9 §5)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.rules import GrantRefused, IntentFacts, PolicyStore, SessionGrants, resolve_with_policy
from core.rules.model import Rule, family_members, make_rule
from core.rules.session_grants import grant_rules
from core.wire.decisions import SessionApprovalDecision
from tests.rules.support import HOME, Layout, resolve


def test_grants_are_appended_last_and_reported_as_session_approval(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "ask"}}})
    store = layout.store()
    grants = SessionGrants(store)
    [grant] = grants.add([("bash", "npm test *")], "Explore")
    assert resolve(store, "bash", "npm test --watch").verdict == "ask"  # not given the grants
    facts = IntentFacts("bash", ("npm test --watch",))
    granted = resolve_with_policy(store.policy("Explore"), facts, grants.rules())
    assert granted.verdict == "allow"
    assert granted.decided_by() == {"kind": "session_approval", "surface": "bash",
                                    "pattern": "npm test *"}
    assert grants.list() == (grant,)
    assert grants.revoke(grant.id) is True
    assert grants.revoke(grant.id) is False
    assert resolve_with_policy(store.policy("Explore"), facts, grants.rules()).verdict == "ask"


def test_family_grant_covers_both_members_and_ignores_child_floor(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    store = layout.store()
    grants = SessionGrants(store)
    [grant] = grants.add([("external_directory", "/other/*")], "Explore")
    assert [r.surface for r in grant.rules] == ["external_directory_read",
                                                "external_directory_write"]
    facts = IntentFacts("external_directory", ("/other/x",), floor="<opaque-bash-wrapper>")
    result = resolve_with_policy(store.policy("Explore"), facts, grants.rules())
    assert result.verdict == "allow" and isinstance(result.decision, SessionApprovalDecision)


@pytest.mark.parametrize(
    ("deny", "grant"),
    [
        ("git push --force *", "git push *"),
        ("git push *", "git push *"),
        ("rm *", "*"),
        ("git *", "git push origin main"),
        ("git push --force *", "git p*"),
    ],
)
def test_grant_that_would_shadow_a_deny_is_refused(tmp_path: Path, deny: str, grant: str) -> None:
    layout = Layout(tmp_path)
    path = layout.write_global({"permission": {"bash": {"*": "ask", deny: "deny"}}})
    grants = SessionGrants(layout.store())
    shadow = grants.would_shadow_deny("Explore", "bash", grant)
    assert shadow is not None
    assert (shadow.surface, shadow.pattern, shadow.origin, shadow.source) == (
        "bash", deny, "global", str(path))
    with pytest.raises(GrantRefused) as refused:
        grants.add([("bash", "ls"), ("bash", grant)], "Explore")
    assert refused.value.shadowed == (shadow,)
    assert grants.list() == ()  # all or nothing


@pytest.mark.parametrize(
    ("permission", "surface", "grant"),
    [
        ({"bash": {"*": "ask", "git push --force *": "deny"}}, "bash", "npm *"),
        ({"bash": {"*": "ask", "rm *": "deny"}}, "skill", "*"),
        ({"bash": {"rm *": "deny", "rm -i *": "allow"}}, "bash", "rm -i *"),
        ({"*": "deny", "bash": {"git *": "ask"}}, "bash", "git push *"),
    ],
)
def test_grants_that_shadow_nothing_are_recorded(
    tmp_path: Path, permission: dict[str, object], surface: str, grant: str
) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": permission})
    grants = SessionGrants(layout.store())
    assert grants.would_shadow_deny("Explore", surface, grant) is None
    assert len(grants.add([(surface, grant)], "Explore")) == 1


def test_explicit_default_deny_counts(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"*": "deny"}})
    default = SessionGrants(layout.store()).would_shadow_deny("Explore", "bash", "git push *")
    assert default is not None and (default.surface, default.pattern) == ("*", "*")


def test_family_grant_is_checked_against_both_members(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path_write": {"~/.ssh/*": "deny"}}})
    grants = SessionGrants(layout.store())
    member = grants.would_shadow_deny("Explore", "path", "/home/me/*")
    assert member is not None
    assert (member.surface, member.pattern, member.witness) == ("path_write", "~/.ssh/*",
                                                                "/home/me/.ssh/")
    assert grants.would_shadow_deny("Explore", "path_read", "/home/me/*") is None


def test_per_agent_deny_is_checked_for_every_agent(tmp_path: Path) -> None:
    # The grant covers the whole session, so another agent's deny refuses it too (issue 9 §5).
    layout = Layout(tmp_path)
    layout.write_agent("Explore", 'permission:\n  bash:\n    "curl *": deny\n')
    grants = SessionGrants(layout.store())
    assert grants.would_shadow_deny("Explore", "bash", "curl *") is not None
    shadow = grants.would_shadow_deny("Plan", "bash", "curl *")
    assert shadow is not None and shadow.agent == "Explore"
    assert grants.would_shadow_deny("Plan", "bash", "wget *") is None


def test_grant_made_for_one_agent_is_refused_when_another_agents_file_denies(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "ask"}}})
    path = layout.write_agent("Reviewer", 'permission:\n  bash:\n    "curl *": deny\n', project=True)
    grants = SessionGrants(layout.store())
    shadow = grants.would_shadow_deny("Explore", "bash", "curl *")
    assert shadow is not None and shadow.agent == "Reviewer" and shadow.source == str(path)
    assert "of agent 'Reviewer'" in shadow.describe()
    try:
        grants.add([("bash", "curl *")], "Explore")
    except GrantRefused:
        pass
    else:
        raise AssertionError("a grant that shadows another agent's deny was recorded")
    assert grants.list() == ()


def test_a_recorded_grant_never_overrides_a_deny_at_judgment_time(tmp_path: Path) -> None:
    # `a*c` against `*b*` share `abc`, which the former witness heuristic did not find: the exact
    # check now refuses it (issue 34); forced in, the judgment still denies.
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "ask", "*b*": "deny"}}})
    store = layout.store()
    grants = SessionGrants(store)
    with pytest.raises(GrantRefused, match=r"e\.g\. 'abc'"):
        grants.add([("bash", "a*c")], "Explore")
    forced = grant_rules("bash", "a*c", HOME)
    policy = store.policy("Explore")
    denied = resolve_with_policy(policy, IntentFacts("bash", ("abc",)), forced)
    assert denied.verdict == "deny"
    assert denied.decided_by() == {"kind": "rule", "surface": "bash", "pattern": "*b*", "origin": "global"}
    assert any(step["step"] == "grant-overridden" for step in denied.trail)
    granted = resolve_with_policy(policy, IntentFacts("bash", ("axc",)), forced)
    # an ask still becomes allow
    assert granted.verdict == "allow" and isinstance(granted.decision, SessionApprovalDecision)


def test_a_deny_added_after_the_grant_wins(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "ask"}}})
    store = layout.store()
    grants = SessionGrants(store)
    grants.add([("bash", "curl *")], "Explore")
    layout.write_agent("Reviewer", 'permission:\n  bash:\n    "curl *": deny\n')
    facts = IntentFacts("bash", ("curl evil.example",))
    assert resolve_with_policy(store.policy("Reviewer"), facts, grants.rules()).verdict == "deny"
    assert resolve_with_policy(store.policy("Explore"), facts, grants.rules()).verdict == "allow"


ACTIONS = st.sampled_from(["allow", "deny", "ask"])
PATTERNS = st.one_of(st.just("*"), st.text(alphabet="ab*?", min_size=1, max_size=3))
SURFACES = st.sampled_from(["bash", "path", "path_read"])
RULESETS = st.dictionaries(SURFACES, st.dictionaries(PATTERNS, ACTIONS, max_size=4), max_size=3)


def _frontmatter(permission: dict[str, dict[str, str]]) -> str:
    lines = ["permission:"]
    for surface, patterns in permission.items():
        lines.append(f"  {surface}:")
        lines += [f'    "{pattern}": {action}' for pattern, action in patterns.items()]
    return "\n".join(lines) + "\n" if permission else ""


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    global_rules=RULESETS,
    agent_rules=st.dictionaries(st.sampled_from(["A", "B", "C"]), RULESETS, max_size=3),
    grant_patterns=st.lists(st.tuples(SURFACES, PATTERNS), min_size=1, max_size=3),
    values=st.lists(st.text(alphabet="ab", max_size=3), min_size=1, max_size=3),
    surface=SURFACES,
)
def test_grants_never_widen_past_any_agents_deny(
    tmp_path_factory: object, global_rules: dict[str, dict[str, str]],
    agent_rules: dict[str, dict[str, dict[str, str]]], grant_patterns: list[tuple[str, str]],
    values: list[str], surface: str,
) -> None:
    from pytest import TempPathFactory

    assert isinstance(tmp_path_factory, TempPathFactory)
    layout = Layout(tmp_path_factory.mktemp("grants"))
    layout.write_global({"permission": global_rules})
    for name, permission in agent_rules.items():
        layout.write_agent(name, _frontmatter(permission), project=name == "C")
    store = PolicyStore(layout.agent_dir, layout.project, None, home=HOME)
    facts = IntentFacts(surface, tuple(values))
    # Grants recorded through the refusal (what `w` does) ...
    book = SessionGrants(store)
    with contextlib.suppress(GrantRefused):
        book.add(grant_patterns, "A")
    # ... and the same grants forced in, as if the refusal had missed every one of them.
    forced: list[Rule] = [
        make_rule(member, pattern, "allow", origin="session", layer="session", home=HOME)
        for grant_surface, pattern in grant_patterns for member in family_members(grant_surface)
    ]
    for agent in ("A", "B", "C", "D"):
        config_only = resolve_with_policy(store.policy(agent), facts).verdict
        for session_rules in (book.rules(), tuple(forced)):
            with_grants = resolve_with_policy(store.policy(agent), facts, session_rules).verdict
            if config_only == "deny":
                assert with_grants == "deny", (agent, session_rules)
            else:
                assert with_grants in (config_only, "allow")
