"""The serving loop end to end on real files and real inotify: drain, judge, answer once."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.forwarding.liveness import SessionHeld, heartbeat_path, read_heartbeat
from core.person import AskAdded, AskWithdrawn, Person
from core.seams import Seams
from core.serving import ServingCore
from core.vocabulary.asks import UNATTENDED_DENIAL, Arbiter, DenyingArbiter, Judgment, LeavingArbiter
from core.vocabulary.events import ServeEvent
from core.wire.decisions import RuleDecision
from core.wire.request import ParsedRequest
from tests.helpers import (
    read_response_when_written,
    request_body,
    response_path,
    session_dir,
    wait_for,
    write_request,
    write_request_bytes,
)

S = "019ff969-c34c-70be-9034-fae19c852932"


class AllowLs:
    """A stand-in recorded authority: allows `ls` facts, asks for the rest."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        intent = parsed.access_intent
        if intent is not None and intent.match_values == ("ls",):
            return Judgment("allow", RuleDecision(surface="bash", pattern="ls", origin="global"))
        return Judgment("ask")


class Running:
    def __init__(self, core: ServingCore, task: asyncio.Task[None], events: list[ServeEvent]) -> None:
        self.core, self.task, self.events = core, task, events

    async def stop(self) -> None:
        self.core.stop()
        await asyncio.wait_for(self.task, 5)


async def start(tmp_path: Path, arbiter: Arbiter, **kwargs: object) -> Running:
    core = ServingCore(tmp_path / "root", tmp_path / "state", arbiter, **kwargs)  # type: ignore[arg-type]
    events: list[ServeEvent] = []
    core.subscribe(events.append)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    await asyncio.sleep(0)  # let it start; its first scan serves whatever is already there
    return Running(core, task, events)


@pytest.fixture
async def denying(tmp_path: Path) -> AsyncIterator[Running]:
    running = await start(tmp_path, DenyingArbiter())
    yield running
    await running.stop()


async def test_fail_safe_denial_is_written_and_request_removed(tmp_path: Path, denying: Running) -> None:
    request = write_request(tmp_path / "root", S, "r1")
    body = await read_response_when_written(tmp_path / "root", S, "r1")
    # The agent is told why (issue 9 §6): 20.7.3 relays `denialReason`, never `decidedBy`.
    assert body["approved"] is False and body["state"] == "denied_with_reason"
    assert body["denialReason"] == UNATTENDED_DENIAL
    assert body["decidedBy"] == {"kind": "unavailable", "reason": "no person is attending this authorizer"}
    assert body["responderSessionId"] == S and isinstance(body["respondedAt"], int)
    await wait_for(lambda: not request.exists(), what="request deleted after answering")


async def test_requests_present_at_start_are_served(tmp_path: Path) -> None:
    write_request(tmp_path / "root", S, "early")
    running = await start(tmp_path, DenyingArbiter())
    try:
        body = await read_response_when_written(tmp_path / "root", S, "early")
        assert body["state"] == "denied_with_reason"
    finally:
        await running.stop()


async def test_heartbeat_is_published_and_removed(tmp_path: Path) -> None:
    running = await start(tmp_path, DenyingArbiter())
    path = heartbeat_path(tmp_path / "root", S)
    record = read_heartbeat(path)
    assert record is not None and record.pid == os.getpid() and record.session_id == S
    assert json.loads(path.read_bytes()).keys() == {"sessionId", "pid", "updatedAt"}
    await running.stop()
    assert not path.exists()


async def test_second_instance_refuses_a_served_session(tmp_path: Path, denying: Running) -> None:
    other = ServingCore(tmp_path / "root", tmp_path / "state", DenyingArbiter())
    with pytest.raises(SessionHeld, match=f"pid {os.getpid()}"):
        other.add_session(S)


async def test_rule_decision_answers_with_rule_provenance(tmp_path: Path) -> None:
    running = await start(tmp_path, LeavingArbiter(), judge=AllowLs())
    try:
        intent = {"surface": "bash", "matchValues": ["ls"], "boundaryValue": None, "requesterCwd": "/w",
                  "principal": {"sessionId": "c", "agentName": "Explore"}}
        write_request(tmp_path / "root", S, "allowed", accessIntent=intent)
        body = await read_response_when_written(tmp_path / "root", S, "allowed")
        assert body["state"] == "approved"
        assert body["decidedBy"] == {"kind": "rule", "surface": "bash", "pattern": "ls", "origin": "global"}
    finally:
        await running.stop()


async def test_leave_keeps_the_request_and_reports_withdrawal(tmp_path: Path) -> None:
    running = await start(tmp_path, LeavingArbiter())
    try:
        request = write_request(tmp_path / "root", S, "left")
        await wait_for(lambda: any(e.kind == "left" for e in running.events), what="left event")
        assert request.exists() and not response_path(tmp_path / "root", S, "left").exists()
        request.unlink()
        await wait_for(lambda: any(e.kind == "withdrawn" for e in running.events), what="withdrawal")
        assert not response_path(tmp_path / "root", S, "left").exists()
    finally:
        await running.stop()


async def test_person_decides_without_blocking_other_asks(tmp_path: Path) -> None:
    person = Person()
    seen: list[object] = []
    person.subscribe(seen.append)
    running = await start(tmp_path, person, judge=AllowLs())
    root = tmp_path / "root"
    intent = {"surface": "bash", "matchValues": ["ls"], "boundaryValue": None, "requesterCwd": "/w",
              "principal": {"sessionId": "c", "agentName": "Explore"}}
    try:
        write_request(root, S, "a1")
        write_request(root, S, "a2")
        await wait_for(lambda: len(person.pending()) == 2, what="two pending asks")
        # While both wait for a person, a rule-decided ask is answered at once.
        write_request(root, S, "ruled", accessIntent=intent)
        assert (await read_response_when_written(root, S, "ruled"))["state"] == "approved"
        assert [a.key.name for a in person.pending()] == ["a1.json", "a2.json"]
        decided = await person.approve_once(person.pending()[0].key)
        assert decided.kind == "approved"
        body = await read_response_when_written(root, S, "a1")
        assert body["decidedBy"] == {"kind": "user", "via": "dialog"} and body["state"] == "approved"
        # The child gives up on the other one: it leaves the queue, never as a denial.
        (session_dir(root, S) / "requests" / "a2.json").unlink()
        await wait_for(lambda: not person.pending(), what="withdrawn ask removed")
        assert any(isinstance(e, AskWithdrawn) for e in seen)
        assert sum(isinstance(e, AskAdded) for e in seen) == 2
        assert not response_path(root, S, "a2").exists()
    finally:
        await running.stop()


async def test_existing_response_is_never_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_request(root, S, "twice")
    earlier = response_path(root, S, "twice")
    earlier.write_bytes(b'{"approved":true,"state":"approved","responderSessionId":"x"}')
    running = await start(tmp_path, DenyingArbiter())
    try:
        await wait_for(lambda: not (session_dir(root, S) / "requests" / "twice.json").exists(),
                       what="request cleaned up")
        assert earlier.read_bytes() == b'{"approved":true,"state":"approved","responderSessionId":"x"}'
    finally:
        await running.stop()


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("garbage.json", b"not json", "not valid JSON"),
        ("array.json", b"[]", "not an object"),
        ("utf8.json", b'{"id":"\xff"}', "not valid UTF-8"),
        ("noid.json", json.dumps({"createdAt": 1}).encode(), "'id' is missing"),
        ("mismatch.json", json.dumps(request_body("other", S)).encode(), "does not match its file name"),
        ("target.json", json.dumps(request_body("target", "someone-else")).encode(),
         "targets session 'someone-else'"),
    ],
    ids=["garbage", "array", "utf8", "noid", "mismatch", "target"],  # fixed: the bodies hold the time
)
async def test_unusable_request_is_quarantined_and_child_answered(
    tmp_path: Path, denying: Running, name: str, data: bytes, reason: str
) -> None:
    root = tmp_path / "root"
    path = write_request_bytes(root, S, name, data)
    stem = name.removesuffix(".json")
    body = await read_response_when_written(root, S, stem)
    assert body["state"] == "denied_with_reason" and body["approved"] is False
    assert body["decidedBy"]["kind"] == "gate_error" and reason in body["decidedBy"]["reason"]
    assert reason in body["denialReason"]
    await wait_for(lambda: not path.exists(), what="quarantined after the answer")
    await wait_for(lambda: bool(denying.core.quarantine.records()), what="reason recorded")
    records = denying.core.quarantine.records()
    assert [r["reason"] for r in records if reason in str(r["reason"])]
    kept = list((tmp_path / "state" / "quarantine").glob(f"*/*-{stem}.json"))
    assert len(kept) == 1 and kept[0].read_bytes() == data


async def test_unsafe_file_name_is_quarantined_without_an_answer(tmp_path: Path, denying: Running) -> None:
    root = tmp_path / "root"
    name = "tool call ü.json"
    path = write_request_bytes(root, S, name, b"garbage")
    await wait_for(lambda: not path.exists(), what="quarantine")
    assert os.listdir(session_dir(root, S) / "responses") == []
    await wait_for(lambda: bool(denying.core.quarantine.records()), what="reason recorded")
    assert denying.core.quarantine.records()[0]["childAnswered"] is False


async def test_symlink_in_inbox_is_not_followed(tmp_path: Path, denying: Running) -> None:
    root = tmp_path / "root"
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(request_body("link", S)))
    requests = session_dir(root, S) / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    (requests / "link.json").symlink_to(target)
    body = await read_response_when_written(root, S, "link")
    assert "symbolic link" in body["decidedBy"]["reason"]
    assert target.exists()


async def test_other_sessions_are_not_touched(tmp_path: Path, denying: Running) -> None:
    root = tmp_path / "root"
    foreign = write_request(root, "someone-else", "theirs")
    write_request(root, S, "mine")
    await read_response_when_written(root, S, "mine")
    await denying.core.rescan_all()  # one more full pass: the foreign inbox is still not touched
    assert foreign.exists() and not response_path(root, "someone-else", "theirs").exists()


async def test_polling_fallback_serves_too(tmp_path: Path) -> None:
    running = await start(tmp_path, DenyingArbiter(), seams=Seams(force_polling=True))
    try:
        write_request(tmp_path / "root", S, "polled")
        assert (await read_response_when_written(tmp_path / "root", S, "polled"))["approved"] is False
    finally:
        await running.stop()


# --------------------------------------------------------------------------------------------------
# Removing an answered request is no news to the watcher, yet a request reusing its name is served.


S = "019ff969-c34c-70be-9034-fae19c852932"


async def test_a_name_reused_after_its_answered_request_was_removed_is_served_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    core = ServingCore(root, tmp_path / "state", DenyingArbiter())
    core.add_session(S)
    task = asyncio.create_task(core.run())
    request = session_dir(root, S) / "requests" / "r1.json"
    try:
        write_request(root, S, "r1")
        answered = response_path(root, S, "r1")
        await wait_for(lambda: answered.exists() and not request.exists(), what="answered")
        await wait_for(lambda: "r1.json" not in core.served[S].records, what="the removal noted")
        response_path(root, S, "r1").unlink()  # the child read its answer
        write_request(root, S, "r1")
        await wait_for(lambda: response_path(root, S, "r1").exists(), what="the reused name answered")
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
