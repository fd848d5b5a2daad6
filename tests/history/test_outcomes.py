"""Every way an ask ends reaches the history with the right fields, through a real serving core: the
time to decide counts from when the ask was shown, an ask withdrawn while no one served is closed at
the next start, and the requester's and the principal's agent names are both kept (flagged when they
differ)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.person import AskAdded, Person
from core.serving import ServingCore
from core.serving.verdicts import VerdictRow
from core.vocabulary.asks import AskKey, DenyingArbiter, Judgment, LeavingArbiter
from core.wire.decisions import AuthorizerDecision
from core.wire.request import ParsedRequest
from core.wiring import take_session
from tests.helpers import (
    read_response_when_written,
    response_path,
    wait_for,
    write_request,
    write_request_bytes,
)
from tests.history.support import Node, S, intent, suggestion
from tui.commands.history_command import _cells


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
    recorded = VerdictRow(row.response or b"", written=True, outcome="fail-safe", ended=True,
                          decided_at=row.decided_at)
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
    person = Person()
    person.subscribe(lambda e: node.history.mark_shown(e.ask.key, 1.0e9) if isinstance(e, AskAdded) else None)
    await node.start(person)
    write_request(node.root, S, "p", accessIntent=intent("bash", "make test"))
    await wait_for(lambda: bool(person.pending()), what="pending ask")
    assert node.only_row().outcome == "pending"
    await person.deny(person.pending()[0].key, "not now")
    await wait_for(lambda: ended(node), what="answered row")
    row = node.only_row()
    assert (row.outcome, row.verdict, row.reason) == ("user", "denied_with_reason", "not now")
    assert row.decider == "person (dialog)" and row.shown_at == 1.0e9
    assert json.loads(row.response or b"")["state"] == "denied_with_reason"


async def test_withdrawn_by_the_child(node: Node) -> None:
    person = Person()
    await node.start(person)
    path = write_request(node.root, S, "w", accessIntent=intent("bash", "make test"))
    await wait_for(lambda: bool(person.pending()), what="pending ask")
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
    person = Person(node.authority)
    await node.start(person)
    asks = (("once", "npm ci"), ("child", "npm run a"), ("grant", "npm run b"), ("by", "npm run c"))
    for rid, value in asks:
        write_request(node.root, S, rid, accessIntent=intent("bash", value),
                      sessionApproval=suggestion("bash", "npm run *"))
    write_request(node.root, S, "rule", accessIntent=intent("bash", "git status"))
    await wait_for(lambda: len(person.pending()) == 4, what="four asks for the person")
    key = {a.request.id: a.key for a in person.pending()}
    await person.approve_once(key["once"])
    await person.approve_for_requester_session(key["child"])
    await person.approve_for_serving_session(key["grant"], reach=person.grant_reach(key["grant"]))
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


@pytest.fixture
async def bare_node(tmp_path: Path) -> AsyncIterator[Node]:
    n = Node(tmp_path)
    yield n
    if hasattr(n, "task"):
        await n.stop()


async def test_time_to_decide_counts_from_when_the_ask_was_shown(bare_node: Node) -> None:
    person = Person()
    await bare_node.start(person)
    write_request(bare_node.root, S, "p", accessIntent=intent("bash", "make test"))
    await wait_for(lambda: bool(person.pending()), what="pending ask")
    arrived = bare_node.only_row().arrived_at
    shown = arrived - 100.0  # an explicit, distinct instant: the span must start here, not at arrival
    bare_node.history.mark_shown(AskKey(S, "p.json"), shown)
    await person.approve_once(person.pending()[0].key)
    await wait_for(lambda: bare_node.only_row().decided_at is not None, what="decided row")
    row = bare_node.only_row()
    assert row.shown_at == shown and row.decided_at is not None and row.decide_ms is not None
    assert row.decide_ms == pytest.approx((row.decided_at - shown) * 1000)
    assert row.decide_ms >= 100_000


async def test_an_ask_withdrawn_while_no_one_served_is_closed_at_start(bare_node: Node) -> None:
    person = Person()
    await bare_node.start(person)
    gone = write_request(bare_node.root, S, "gone", accessIntent=intent("bash", "make a"))
    write_request(bare_node.root, S, "stays", accessIntent=intent("bash", "make b"))
    await wait_for(lambda: len(person.pending()) == 2, what="two pending asks")
    await bare_node.stop()
    gone.unlink()  # the child gave up while pi-authorizer was down
    assert {r.outcome for r in bare_node.history.query()} == {"pending"}

    core = ServingCore(bare_node.root, bare_node.state, Person(), ledger=bare_node.history)
    assert take_session(core, bare_node.history, S).inbox.session_id == S
    try:
        outcomes = {r.request_id: (r.outcome, r.ended_at is not None) for r in bare_node.history.query()}
        assert outcomes == {"gone": ("withdrawn", True), "stays": ("pending", False)}
    finally:
        for served in core.served:
            served.heartbeat.clear()
            served.lock.release()


async def test_log_and_history_show_both_names_when_they_differ(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = Node(tmp_path, {"bash": {"git *": "allow"}})
    await node.start(DenyingArbiter())
    try:
        with caplog.at_level(logging.INFO, logger="pi_authorizer"):
            write_request(node.root, S, "r1", requesterAgentName="Plan",
                          accessIntent=intent("bash", "git status", agent="Explore"))
            await read_response_when_written(node.root, S, "r1")
            write_request(node.root, S, "r2", requesterAgentName="Explore",
                          accessIntent=intent("bash", "git log", agent="Explore"))
            await read_response_when_written(node.root, S, "r2")
            # The served line is logged once the request is removed, a moment after the response.
            await wait_for(
                lambda: any("request=r2" in (m := r.getMessage()) and "->" in m for r in caplog.records),
                what="r2's served line",
            )
    finally:
        await node.stop()
    messages = [record.getMessage() for record in caplog.records]
    served = [m for m in messages if "request=r" in m and "->" in m]
    assert any("request=r1" in m and "agent=Explore requester=Plan AGENT-MISMATCH" in m for m in served)
    assert any("request=r2" in m and "agent=Explore" in m and "MISMATCH" not in m for m in served)
    rows = {row.request_id: row for row in node.history.query()}
    assert rows["r1"].agent == "Explore" and rows["r1"].requester_agent() == "Plan"
    assert rows["r1"].agent_mismatch() is not None and rows["r2"].agent_mismatch() is None
    assert _cells(rows["r1"])[1] == "Explore [requester Plan]"
