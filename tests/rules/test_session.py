"""Serving-session grants and the refusal of grants that would shadow a deny."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.rules import GrantRefused, IntentFacts, SessionGrants, resolve_with_policy
from core.wire.decisions import SessionApprovalDecision
from tests.rules.support import Layout, resolve


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
                                                                "~/.ssh/*")
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
