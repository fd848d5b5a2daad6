"""Every way an ask ends reaches the history with the right fields, through a real serving core."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.person import AskAdded, HumanAuthorizer
from core.serving.asks import DenyingArbiter, Judgment, LeavingArbiter
from core.serving.verdicts import RecordedVerdict
from core.wire.decisions import AuthorizerDecision
from core.wire.request import ParsedRequest
from tests.helpers import response_path, wait_for, write_request, write_request_bytes
from tests.history.support import Node, S, intent, suggestion


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    n = Node(tmp_path, {"bash": {"git *": "allow", "rm *": {"action": "deny", "reason": "no rm"}}})
    yield n
    if hasattr(n, "task"):
        await n.stop()


def ended(node: Node) -> bool:
    rows = node.history.query()
    return len(rows) == 1 and rows[0].ended_at is not None


async def test_fail_safe_denial_keeps_raw_bytes_response_and_provenance(node: Node) -> None:
    await node.start(DenyingArbiter())
    path = write_request(node.root, S, "r1")
    raw = path.read_bytes()
    await wait_for(lambda: ended(node), what="answered row")
    row = node.only_row()
    assert row.raw == raw and row.request_id == "r1" and row.served_session == S
    assert (row.outcome, row.verdict, row.written) == ("fail-safe", "denied_with_reason", 1)
    reason = "no person is attending this authorizer"
    assert row.decider == f"fail-safe: {reason}"
    assert row.decided_by_json() == {"kind": "unavailable", "reason": reason}
    assert row.response == response_path(node.root, S, "r1").read_bytes()
    assert row.responder_session == S and row.agent == "Explore" and row.surface == "bash"
    assert row.decide_ms is not None and 0 <= row.decide_ms < 5000
    assert row.decided_at is not None and row.arrived_at <= row.decided_at <= row.ended_at  # type: ignore[operator]
    recorded = RecordedVerdict(row.response or b"", written=True, outcome="fail-safe")
    assert node.history.recorded_verdicts(S, ["r1", "r2"]) == {"r1": recorded}


async def test_rule_decision_names_the_rule(node: Node) -> None:
    await node.start(LeavingArbiter())
    write_request(node.root, S, "g", accessIntent=intent("bash", "git status"))
    await wait_for(lambda: ended(node), what="answered row")
    row = node.only_row()
    assert (row.outcome, row.verdict) == ("rule", "approved")
    assert row.decider == "rule bash 'git *' (global)"
    assert row.facts_json()["accessIntent"]["matchValues"] == ["git status"]
    assert row.value == "git status"


async def test_rule_denial_keeps_the_reason(node: Node) -> None:
    await node.start(LeavingArbiter())
    write_request(node.root, S, "rm", accessIntent=intent("bash", "rm -rf x"))
    await wait_for(lambda: ended(node), what="answered row")
    row = node.only_row()
    assert (row.outcome, row.verdict, row.reason) == ("rule", "denied_with_reason", "no rm")


async def test_session_grant_is_its_own_outcome(node: Node) -> None:
    node.authority.grants_for(S).add([("bash", "ls *")], "Explore")
    await node.start(LeavingArbiter())
    write_request(node.root, S, "ls", accessIntent=intent("bash", "ls -la"))
    await wait_for(lambda: ended(node), what="answered row")
    row = node.only_row()
    assert (row.outcome, row.verdict) == ("session_grant", "approved")
    assert row.decider == "session grant bash 'ls *'"


class ApprovingLink:
    async def review(self, parsed: ParsedRequest) -> Judgment | None:
        return Judgment("allow", AuthorizerDecision(name="reviewer", verdict="allow", reason=None))


async def test_chain_link_decision(node: Node) -> None:
    await node.start(LeavingArbiter(), chain=ApprovingLink())
    write_request(node.root, S, "c", accessIntent=intent("bash", "make test"))
    await wait_for(lambda: ended(node), what="answered row")
    row = node.only_row()
    assert (row.outcome, row.verdict, row.decider) == ("chain", "approved", "chain link reviewer")


async def test_person_decision_records_shown_time_and_time_to_decide(node: Node) -> None:
    human = HumanAuthorizer()
    human.subscribe(lambda e: node.history.mark_shown(e.ask.key, 1.0e9) if isinstance(e, AskAdded) else None)
    await node.start(human)
    write_request(node.root, S, "p", accessIntent=intent("bash", "make test"))
    await wait_for(lambda: bool(human.pending()), what="pending ask")
    assert node.only_row().outcome == "pending"
    await human.deny(human.pending()[0].key, "not now")
    await wait_for(lambda: ended(node), what="answered row")
    row = node.only_row()
    assert (row.outcome, row.verdict, row.reason) == ("user", "denied_with_reason", "not now")
    assert row.decider == "person (dialog)" and row.shown_at == 1.0e9
    assert json.loads(row.response or b"")["state"] == "denied_with_reason"


async def test_withdrawn_by_the_child(node: Node) -> None:
    human = HumanAuthorizer()
    await node.start(human)
    path = write_request(node.root, S, "w", accessIntent=intent("bash", "make test"))
    await wait_for(lambda: bool(human.pending()), what="pending ask")
    path.unlink()
    await wait_for(lambda: ended(node), what="withdrawn row")
    row = node.only_row()
    assert (row.outcome, row.verdict, row.response) == ("withdrawn", None, None)
    assert node.history.summary().withdrawn == 1


async def test_quarantined_keeps_the_raw_bytes_and_reason(node: Node) -> None:
    await node.start(LeavingArbiter())
    write_request_bytes(node.root, S, "bad.json", b'{"id": "bad", "garbage\x1b')
    await wait_for(lambda: ended(node), what="quarantined row")
    row = node.only_row()
    assert row.outcome == "quarantined" and row.raw == b'{"id": "bad", "garbage\x1b'
    assert row.reason is not None and row.reason.startswith("unusable request: not valid JSON")
    assert row.request_id is None and row.verdict is None


async def test_left_then_gone_stays_left(node: Node) -> None:
    await node.start(LeavingArbiter())
    path = write_request(
        node.root,
        S,
        "l",
        accessIntent=intent("bash", "make test"),
        sessionApproval=suggestion("bash", "make *"),
    )
    await wait_for(lambda: any(e.kind == "left" for e in node.events), what="left")
    assert node.only_row().outcome == "left"
    path.unlink()
    await wait_for(lambda: ended(node), what="left row closed")
    row = node.only_row()
    assert row.outcome == "left" and row.verdict is None
    assert row.facts_json()["sessionApproval"] == [{"surface": "bash", "pattern": "make *"}]


async def test_history_tells_once_child_session_whole_session_grant_and_its_decisions_apart(
    node: Node,
) -> None:
    human = HumanAuthorizer(node.authority)
    await node.start(human)
    asks = (("once", "npm ci"), ("child", "npm run a"), ("grant", "npm run b"), ("by", "npm run c"))
    for rid, value in asks:
        write_request(node.root, S, rid, accessIntent=intent("bash", value),
                      sessionApproval=suggestion("bash", "npm run *"))
    write_request(node.root, S, "rule", accessIntent=intent("bash", "git status"))
    await wait_for(lambda: len(human.pending()) == 4, what="four asks for the person")
    key = {a.request.id: a.key for a in human.pending()}
    await human.approve_once(key["once"])
    await human.approve_for_requester_session(key["child"])
    await human.approve_for_serving_session(key["grant"])
    await wait_for(lambda: all(r.ended_at is not None for r in node.history.query()) and
                   len(node.history.query()) == 5, what="five ended rows")
    rows = {r.request_id: r for r in node.history.query()}
    seen = {rid: (r.outcome, r.verdict, r.decider) for rid, r in rows.items()}
    assert seen == {
        "once": ("user", "approved", "person (dialog)"),
        "child": ("user", "approved_for_session", "person (dialog)"),
        "grant": ("user_grant", "approved", "person (dialog), recorded a whole-session grant"),
        "by": ("session_grant", "approved", "the grant just recorded: session grant bash 'npm run *'"),
        "rule": ("rule", "approved", "rule bash 'git *' (global)"),
    }
    assert node.history.summary().median_person_ms is not None
