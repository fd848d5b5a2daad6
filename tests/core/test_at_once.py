"""Asks decided at once, judged in their intake's trip on the disk thread (`core.serving.at_once`).

A real serving core, real files and the real history; the judge is scripted by the ask's `value`
(`deny` by a rule, `ask` for the person, `boom` raises) and counts its calls, so a test sees that
every ask is judged exactly once, whichever side of the lane it ends on.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.history import HistoryStore
from core.seams import Seams
from core.serving.intake import INTAKE_FILES
from core.serving.loop import ServingCore
from core.serving.sessions import ServedSession
from core.testing import HeldAt, ScriptedArbiter, StuckRequests
from core.vocabulary.asks import Arbiter, Ask, AskKey, DenyingArbiter, Judgment
from core.vocabulary.events import ServeEvent, asked
from core.wire.decisions import RuleDecision
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest
from tests.helpers import (
    Served,
    needs_inotify,
    read_response_when_written,
    request_body,
    response_path,
    session_dir,
    wait_for,
    write_request,
)
from tests.history.support import S

RULE = RuleDecision(surface="bash", pattern="*", origin="test")


class ScriptedJudge:
    """Judges by the ask's `value`; counts each ask's judgments (from any thread)."""

    def __init__(self) -> None:
        self.judged: Counter[str] = Counter()
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        with self._lock:
            self.judged[parsed.request.id] += 1
            self.threads.add(threading.current_thread().name)
        value = parsed.request.value
        if value == "boom":
            raise RuntimeError("the judge broke")
        if value == "ask":
            return Judgment(verdict="ask", explanation=("for the person",))
        return Judgment(verdict="deny", decided_by=RULE, reason="not here")


class Core:
    """A serving core on `tmp_path` with the scripted judge and the real history."""

    def __init__(self, tmp_path: Path, arbiter: Arbiter, fault: HeldAt | None = None) -> None:
        self.root = tmp_path / "root"
        self.judge = ScriptedJudge()
        self.store = HistoryStore.in_state_dir(tmp_path / "state")
        seams = Seams(fault=fault) if fault is not None else Seams()
        self.core = ServingCore(self.root, tmp_path / "state", arbiter, judge=self.judge, ledger=self.store,
                                seams=seams)
        self.events: list[ServeEvent] = []
        self.core.subscribe(self.store.observe)
        self.core.subscribe(self.events.append)

    async def __aenter__(self) -> Core:
        self.core.add_session(S)
        self.task = asyncio.create_task(self.core.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.core.stop()
        await asyncio.wait_for(self.task, 30)

    def rows(self, *request_ids: str) -> list[tuple[str | None, int | None]]:
        """(outcome, written) of the history's rows of these requests; the history is closed after."""
        try:
            return [(r.outcome, r.written) for r in self.store.query() if r.request_id in request_ids]
        finally:
            self.store.close()

    def kinds(self, request_id: str | None = None) -> list[str]:
        return [e.kind for e in self.events if request_id is None or e.key.name == f"{request_id}.json"]

    def served(self) -> ServedSession:
        return self.core.served.by_id[S]


def requests_left(root: Path) -> list[str]:
    return sorted(p.name for p in (session_dir(root, S) / "requests").glob("*.json"))


@needs_inotify
async def test_a_burst_decided_at_once_is_answered_in_its_trips_each_reported_once(tmp_path: Path) -> None:
    """More asks than one intake: each judged once on the disk thread, answered once, reported once as
    `answered` (no `arrived`: its arrival is in the same row), one history row each, delivered; no
    record and no held name is left."""
    ids = [f"r{i:04d}" for i in range(INTAKE_FILES + 300)]
    async with Core(tmp_path, DenyingArbiter()) as node:
        for request_id in ids:
            write_request(node.root, S, request_id, value="deny")
        await wait_for(lambda: all(response_path(node.root, S, i).exists() for i in ids)
                       and not requests_left(node.root), within=60, what="answered, requests removed")
        await wait_for(lambda: len(node.kinds()) >= len(ids), what="every answer reported")
        served = node.served()
        assert len(served.records) == 0 and not served.settling
    assert Counter(node.kinds()) == Counter({"answered": len(ids)})
    assert set(node.judge.judged.values()) == {1} and len(node.judge.judged) == len(ids)
    assert all(name.startswith("pi-authorizer-disk") for name in node.judge.threads)
    rows = node.rows(*ids)
    assert len(rows) == len(ids) and set(rows) == {("rule", 1)}


@needs_inotify
async def test_an_ask_for_the_person_in_a_trip_is_shown_judged_once_beside_those_answered_at_once(
    tmp_path: Path,
) -> None:
    """The trip judges every ask; one no one decides at once goes down the route with its judgment
    (never judged twice) and reaches the person; the others are answered at once."""
    person = ScriptedArbiter("person", lambda ask: None)
    async with Core(tmp_path, person) as node:
        write_request(node.root, S, "mine", value="ask")
        for i in range(5):
            write_request(node.root, S, f"rule{i}", value="deny")
        await wait_for(lambda: len(person.asked) == 1, what="the person asked")
        for i in range(5):
            body = await read_response_when_written(node.root, S, f"rule{i}")
            assert body["decidedBy"]["kind"] == "rule" and body["denialReason"] == "not here"
        assert [key.name for key in person.asked] == ["mine.json"]
        assert isinstance(person.shown[person.asked[0]], Ask)
        assert not response_path(node.root, S, "mine").exists()
        person.release(person.asked[0], "allow")
        body = await read_response_when_written(node.root, S, "mine")
        assert body["approved"] is True
    assert set(node.judge.judged.values()) == {1} and len(node.judge.judged) == 6
    assert node.kinds("mine").count("arrived") == 1 and node.kinds("mine").count("answered") == 1


@needs_inotify
async def test_a_judgment_that_fails_in_the_trip_sets_the_file_aside_and_is_never_asked_again(
    tmp_path: Path,
) -> None:
    """A judge that raises on the disk thread: the file is quarantined with why (and its child told),
    the judge asked once; the asks beside it are answered."""
    async with Core(tmp_path, DenyingArbiter()) as node:
        write_request(node.root, S, "bad", value="boom")
        write_request(node.root, S, "good", value="deny")
        body = await read_response_when_written(node.root, S, "good")
        assert body["decidedBy"]["kind"] == "rule"
        await wait_for(lambda: "quarantined" in node.kinds("bad"), what="the failing ask set aside")
        quarantined = next(e for e in node.events if e.kind == "quarantined")
        assert "the judge broke" in (quarantined.reason or "")
        await wait_for(lambda: not requests_left(node.root), what="the bad request moved out")
    assert node.judge.judged["bad"] == 1


@needs_inotify
async def test_a_name_whose_answer_is_settling_is_never_taken_again_by_a_rescan(tmp_path: Path) -> None:
    """While the disk thread holds a trip's batch (recorded, not yet linked), rescans list its file
    again: the name is held (`settling`), so it is neither judged nor answered a second time."""
    held = HeldAt("recorded")
    async with Core(tmp_path, DenyingArbiter(), fault=held) as node:
        write_request(node.root, S, "held", value="deny")
        await wait_for(held.entered.is_set, what="the batch held after its record")
        try:
            assert node.served().settling == {"held.json"}
            for _ in range(3):  # the disk thread is busy: each lists on a thread of its own
                await node.core.rescan_all()
        finally:
            held.release.set()
        body = await read_response_when_written(node.root, S, "held")
        assert body["decidedBy"]["kind"] == "rule"
        await wait_for(lambda: not requests_left(node.root), what="the request removed")
        await node.core.rescan_all()
    assert node.judge.judged["held"] == 1
    assert node.kinds("held") == ["answered"]
    assert node.rows("held") == [("rule", 1)]


@needs_inotify
async def test_a_response_planted_while_an_answer_settles_is_never_replaced_and_set_aside(
    tmp_path: Path,
) -> None:
    """Someone writes `responses/<id>.json` after the trip judged the ask and before its answer is
    linked: the planted file stays as it was, the request is set aside as forged, and the history never
    says this node's answer was delivered."""
    held = HeldAt("recorded")
    async with Core(tmp_path, DenyingArbiter(), fault=held) as node:
        write_request(node.root, S, "planted", value="deny")
        await wait_for(held.entered.is_set, what="the batch held after its record")
        planted = response_path(node.root, S, "planted")
        planted.write_text('{"approved": true, "state": "approved"}')
        held.release.set()
        await wait_for(lambda: "forged" in node.kinds("planted"), what="the request set aside as forged")
        assert planted.read_text() == '{"approved": true, "state": "approved"}'
        await wait_for(lambda: not requests_left(node.root), what="the forged request moved out")
    assert "answered" not in node.kinds("planted")
    assert node.judge.judged["planted"] == 1
    assert not any(written for _, written in node.rows("planted"))


@settings(max_examples=200, deadline=None)
@given(asks=st.lists(st.tuples(st.sampled_from(["Explore", "main", "a\u202eb", "x;y"]),
                               st.sampled_from(["Explore", "main", "\x1b[31m"]),
                               st.sampled_from(["bash", "read", "ba\nsh"]),
                               st.text(max_size=90)), min_size=1, max_size=12))
def test_a_batchs_log_parts_made_with_shared_pieces_read_as_each_made_alone(
    asks: list[tuple[str, str, str, str]],
) -> None:
    """`asked` with the agents and surface parts shared across a batch (`said`) writes exactly what
    it writes for each ask alone, whatever the names, surfaces and values."""
    said: dict[tuple[str, ...], str] = {}
    for i, (requester, principal, surface, value) in enumerate(asks):
        body = request_body(f"r{i}", S, requesterAgentName=requester, surface=surface, value=value,
                            accessIntent={"surface": surface, "matchValues": [value], "boundaryValue": None,
                                          "requesterCwd": "/w",
                                          "principal": {"sessionId": "c", "agentName": principal}})
        parsed = parse_request(json.dumps(body).encode())
        key = AskKey(S, f"r{i}.json")
        assert asked(key, parsed, said) == asked(key, parsed)


@needs_inotify
@pytest.mark.parametrize("history", [True, False])
async def test_an_answer_whose_request_stays_holds_its_name_and_is_never_served_again(
    tmp_path: Path, history: bool
) -> None:
    """Found in review: removing an answered request fails (a folder's mode changed under serving). Its
    name stays held by a record, as the route's is, until the request goes: a rescan never reads it
    again (no "forged" for this node's own answer, no "answered before a restart"), and once its
    child removes it the name is free."""
    store = HistoryStore.in_state_dir(tmp_path / "state") if history else None
    disk = StuckRequests({"x.json"})
    try:
        async with Served(tmp_path, DenyingArbiter(), ledger=store, writer=disk) as served:
            if store is not None:
                served.core.subscribe(store.observe)
            request = write_request(served.root, S, "x")
            body = await read_response_when_written(served.root, S, "x")
            assert body["state"] == "denied_with_reason"
            await wait_for(lambda: "answered" in served.kinds(), what="the answer reported")
            for _ in range(3):
                await served.core.rescan_all(safety=True)
            record = served.core.served.by_id[S].records.get("x.json")
            assert request.exists() and record is not None and record.state == "published"
            request.unlink()  # its child, having read its answer
            await wait_for(lambda: served.core.served.by_id[S].records.get("x.json") is None,
                           what="the name freed once the request went")
            assert served.kinds() == ["answered"]
        if store is not None:
            rows = [(r.outcome, r.written) for r in store.query() if r.request_id == "x"]
            assert rows == [("fail-safe", 1)]
    finally:
        if store is not None:
            store.close()
