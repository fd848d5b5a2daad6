"""The demo's simulated children speak the real protocol: a serving core answers every one of them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving import ServingCore
from core.vocabulary.asks import DenyingArbiter
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest
from core.wire.response import parse_response
from tui.commands.demo_command import describe
from tui.demo.children import ChildResult
from tui.demo.scenario import DEMO_CONFIG, SUGGESTION_AFTER, demo_scenarios, run_children
from tui.render.change import FileChange, change_from_evidence


async def test_every_simulated_child_gets_its_verdict(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(DEMO_CONFIG))
    authority = RecordedAuthority(PolicyStore(agent_dir, tmp_path / "project", None))
    core = ServingCore(tmp_path / "root", tmp_path / "state", DenyingArbiter(), judge=authority)
    core.add_session("demo")
    serving = asyncio.create_task(core.run())
    results: list[ChildResult] = []
    try:
        await asyncio.wait_for(
            run_children(
                tmp_path / "root",
                "demo",
                results.append,
                asyncio.Event(),
                timeout_s=10,
                pause_s=0.01,
                rounds=1,
            ),
            30,
        )
    finally:
        core.stop()
        await serving
    by_summary = {r.summary: r.response for r in results}
    assert len(results) == len(demo_scenarios())
    assert demo_scenarios()[0][0] == "Legacy"  # a 20.7.3 child's ask first: the generation npm serves
    assert all(r is not None for r in by_summary.values())
    allowed = by_summary["git status (a rule allows it)"]
    assert allowed is not None and allowed.state == "approved" and allowed.decided_by is not None
    assert allowed.decided_by.kind == "rule"
    env = by_summary["write .env.local (a rule denies it)"]
    assert env is not None and env.denial_reason == "secrets stay out of agent hands"
    legacy = by_summary["make deploy, as a pi 20.7.3 child (no facts: only you decide it)"]
    assert legacy is not None and legacy.decided_by is not None and legacy.decided_by.kind == "unavailable"
    assert core.quarantine.records() == []
    # Children clean up after themselves, as real ones do.
    assert not (tmp_path / "root" / "sessions" / "demo").exists()


def test_scenarios_cover_both_generations(tmp_path: Path) -> None:
    from tui.demo.children import SimulatedChild

    child = SimulatedChild(tmp_path, "demo", "Explore", "child", "/worktrees/x")
    parsed = [parse_request(json.dumps(build(child)[1]).encode()) for _, build in demo_scenarios()]
    assert all(p.dropped == {} for p in parsed)
    assert sum(p.access_intent is None for p in parsed) == 1
    surfaces = {p.access_intent.surface for p in parsed if p.access_intent}
    assert {"bash", "path_read", "path_write", "external_directory_read", "mcp", "skill"} <= surfaces
    assert any(p.access_intent and p.access_intent.asking_units for p in parsed)
    assert any("\x1b" in (p.request.value or "") for p in parsed)
    # An edit the app shows as a diff, and one command asked often enough to suggest a rule.
    changes = [ask_change_of(p) for p in parsed]
    assert any(c is not None and c.before is not None for c in changes)
    values = [p.request.value for p in parsed]
    assert max(values.count(v) for v in values) >= SUGGESTION_AFTER


def ask_change_of(parsed: ParsedRequest) -> FileChange | None:
    payload = parsed.request.payload
    return None if payload is None else change_from_evidence(payload.request.value, payload.evidence)


def test_what_a_child_received_reads_as_a_sentence() -> None:
    body = {"state": "approved_for_session", "approved": True,
            "decidedBy": {"kind": "user", "via": "dialog"}, "responderSessionId": "demo", "respondedAt": 1}
    result = ChildResult("Explore", "r1", "read from another worktree",
                         parse_response(json.dumps(body).encode()))
    line = describe(result)
    assert line == "Explore asked read from another worktree: approved for its session by you"
    denied = {"state": "denied_with_reason", "approved": False, "denialReason": "not here",
              "decidedBy": {"kind": "rule", "surface": "bash", "pattern": "rm *", "origin": "global"},
              "responderSessionId": "demo", "respondedAt": 1}
    line = describe(ChildResult("B", "r2", "rm", parse_response(json.dumps(denied).encode())))
    assert line == "B asked rm: denied by a rule: not here"


def test_a_whole_session_grant_does_not_read_as_approved_once() -> None:
    """The wire says `approved` by the person for a `w` grant: the summary says what this node did."""
    body = {"state": "approved", "approved": True, "decidedBy": {"kind": "user", "via": "dialog"},
            "responderSessionId": "demo", "respondedAt": 1}
    result = ChildResult("Explore", "r1", "git push", parse_response(json.dumps(body).encode()))
    line = describe(result, "approved_for_serving_session")
    assert "approved once" not in line
    assert line == "Explore asked git push: approved by you, with a whole-session grant recorded"
    assert describe(result, "approved") == "Explore asked git push: approved once by you"
