"""A full or failing disk (ENOSPC, EIO...) that outlasts the write retries (issue 21, findings 1-2).

A transient `OSError` never makes a request unusable: a recorded verdict and a person's decision wait
for the disk (backoff on the injected clock) for as long as the child's request is there, and are
written once it heals; nothing is quarantined, nothing is reported withdrawn, the history keeps one
verdict row. The disk is an injected `FullDisk` (`core.testing`), the clock a `ManualClock`.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
from pathlib import Path

import pytest

from core.disk.writer import DiskWriter
from core.forwarding.liveness import Heartbeat, heartbeat_path, read_heartbeat
from core.history import HistoryStore
from core.person import AskWithdrawn, DecisionRefused, Person, PersonEvent
from core.seams import Seams
from core.serving import ServingCore
from core.serving.verdicts import Ledger
from core.testing import FullDisk, ManualClock, NamedTemps
from core.vocabulary.asks import Arbiter, DenyingArbiter
from core.vocabulary.events import ServeEvent
from tests.helpers import (
    Served,
    read_response_when_written,
    request_body,
    rescanned_until,
    response_path,
    session_dir,
    wait_for,
    write_request,
    write_request_bytes,
)
from tests.history.support import S


class Node:
    """A serving core with a real history (ledger and observer), an injected disk and clock."""

    def __init__(self, tmp_path: Path, arbiter: Arbiter, disk: FullDisk, clock: ManualClock) -> None:
        self.root, self.state = tmp_path / "root", tmp_path / "state"
        self.history = HistoryStore.in_state_dir(self.state, seams=Seams(clock=clock))
        self.events: list[ServeEvent] = []
        seams = Seams(clock=clock, disk=disk, retry_delays=(0.0, 0.0, 0.0))
        ledger: Ledger = self.history
        self.core = ServingCore(self.root, self.state, arbiter, ledger=ledger, seams=seams)
        self.core.subscribe(self.events.append)
        self.core.subscribe(self.history.observe)

    async def __aenter__(self) -> Node:
        self.core.add_session(S)
        self.task = asyncio.create_task(self.core.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.core.stop()
        await asyncio.wait_for(self.task, 10)
        self.history.write_arrivals()

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def quarantined(state: Path) -> list[Path]:
    folder = state / "quarantine"
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


async def rescans(clock: ManualClock, count: int) -> None:
    """Let `count` safety rescans (and the backoff waits) pass on the injected clock."""
    for _ in range(count):
        clock.advance(1.0)
        await asyncio.sleep(0.01)


async def test_a_recorded_verdict_waits_for_a_full_disk_and_is_published_when_it_heals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "pi_authorizer")
    disk, clock = FullDisk(errno.ENOSPC), ManualClock(1_800_000_000.0)
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as node:
        write_request(node.root, S, "full")
        await wait_for(lambda: "answer_failed" in node.kinds(), what="the failed write reported")
        await rescans(clock, 40)  # far longer than the write retries: every republish fails too
        assert disk.attempts > 4
        assert "quarantined" not in node.kinds() and "withdrawn" not in node.kinds()
        assert not quarantined(node.state)
        assert (session_dir(node.root, S) / "requests" / "full.json").exists()
        assert "waiting for disk" in caplog.text
        failed = [e for e in node.events if e.kind == "answer_failed"]
        assert failed and all("waiting for disk" in (e.reason or "") for e in failed)
        disk.full = False
        await rescanned_until(clock, response_path(node.root, S, "full").exists, what="the response")
        body = await read_response_when_written(node.root, S, "full")
        assert body["decidedBy"]["kind"] == "unavailable"  # the verdict recorded, not a gate error
        await wait_for(lambda: not (session_dir(node.root, S) / "requests" / "full.json").exists(),
                       what="the answered request removed")
    rows = node.history.query()
    assert len(rows) == 1 and rows[0].verdict == "denied_with_reason" and rows[0].written == 1


async def test_a_persons_decision_waits_for_a_full_disk_and_is_never_called_withdrawn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "pi_authorizer")
    disk, clock = FullDisk(errno.ENOSPC), ManualClock(1_800_000_000.0)
    person = Person(clock=clock)
    seen: list[PersonEvent] = []
    person.subscribe(seen.append)
    async with Node(tmp_path, person, disk, clock) as node:
        write_request(node.root, S, "decided")
        await wait_for(lambda: bool(person.pending()), what="the pending ask")
        with pytest.raises(DecisionRefused, match="waiting for disk"):
            await person.approve_once(person.pending()[0].key)
        assert not person.pending()  # decided: it does not wait for a second decision
        assert not [e for e in seen if isinstance(e, AskWithdrawn)]
        await rescans(clock, 40)
        assert "quarantined" not in node.kinds() and "withdrawn" not in node.kinds()
        assert not quarantined(node.state) and not person.pending()
        disk.full = False
        await rescanned_until(clock, response_path(node.root, S, "decided").exists, what="the response")
        body = await read_response_when_written(node.root, S, "decided")
        assert body["approved"] is True and body["decidedBy"]["kind"] == "user"
    rows = node.history.query()
    assert len(rows) == 1 and rows[0].verdict == "approved" and rows[0].written == 1, rows
    assert "withdrawn" not in caplog.text.lower().replace("withdrawn or replaced", "")


async def test_a_decision_recorded_then_a_restart_on_a_full_disk_is_published_when_it_heals(
    tmp_path: Path,
) -> None:
    disk, clock = FullDisk(errno.EIO), ManualClock(1_800_000_000.0)
    person = Person(clock=clock)
    async with Node(tmp_path, person, disk, clock) as node:
        write_request(node.root, S, "restart")
        await wait_for(lambda: bool(person.pending()), what="the pending ask")
        with pytest.raises(DecisionRefused, match="waiting for disk"):
            await person.deny(person.pending()[0].key, "not now")
    node.history.close()
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as again:
        await rescans(clock, 30)
        assert "quarantined" not in again.kinds() and not quarantined(again.state)
        disk.full = False
        await rescanned_until(clock, response_path(again.root, S, "restart").exists, what="the response")
        body = await read_response_when_written(again.root, S, "restart")
        assert body["denialReason"] == "not now" and body["decidedBy"]["kind"] == "user"
    rows = again.history.query()
    assert len(rows) == 1 and rows[0].written == 1, rows


async def test_serving_starts_on_a_full_disk_and_publishes_its_heartbeat_once_it_heals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "pi_authorizer")
    disk, clock = FullDisk(errno.ENOSPC), ManualClock(1_800_000_000.0)
    node = Node(tmp_path, DenyingArbiter(clock), disk, clock)
    async with node:  # taking the session writes the first heartbeat: the full disk must not escape
        path = heartbeat_path(node.root, S)
        assert read_heartbeat(path) is None and not node.task.done()
        assert "waiting for disk" in caplog.text
        disk.full = False
        await rescanned_until(clock, lambda: read_heartbeat(path) is not None, what="the heartbeat")


def test_the_heartbeat_is_refreshed_in_place_on_a_full_disk(tmp_path: Path) -> None:
    """Refreshing rewrites the record in place (fixed size): no new space is needed."""
    root = tmp_path / "root"
    root.mkdir()
    disk, clock = FullDisk(errno.ENOSPC, full=False), ManualClock(1_800_000_000.0)
    heartbeat = Heartbeat(root, S, clock=clock, writer=disk)
    heartbeat.beat()
    path = heartbeat_path(root, S)
    first, inode = read_heartbeat(path), path.stat().st_ino
    assert first is not None
    disk.full = True
    for _ in range(3):
        clock.advance(1.0)
        heartbeat.beat()
    again = read_heartbeat(path)
    assert again is not None and again.updated_at_ms == first.updated_at_ms + 3000
    assert path.stat().st_ino == inode and disk.attempts == 0
    path.unlink()  # a new file needs space: refused, and said so
    with pytest.raises(OSError, match="No space left"):
        heartbeat.beat()


# -- delivery verified, not assumed (finding 3) ------------------------------------------------------

PLANTED = b'{"approved":true,"state":"approved","responderSessionId":"someone-else"}'


async def test_a_response_planted_while_the_disk_was_full_is_reported_forged_not_delivered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "pi_authorizer")
    disk, clock = FullDisk(errno.ENOSPC), ManualClock(1_800_000_000.0)
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as node:
        write_request(node.root, S, "planted")
        await wait_for(lambda: "answer_failed" in node.kinds(), what="the failed write reported")
        response_path(node.root, S, "planted").write_bytes(PLANTED)  # someone else's, after our failure
        disk.full = False
        await rescanned_until(clock, lambda: "forged" in node.kinds(), what="the forgery reported")
        assert "answered" not in node.kinds()
        assert response_path(node.root, S, "planted").read_bytes() == PLANTED  # never rewritten
    assert "FORGED RESPONSE" in caplog.text
    rows = node.history.query()
    assert not [r for r in rows if r.written == 1], rows  # no delivery the disk contradicts
    assert any(r.outcome == "forged" for r in rows), rows


async def test_a_response_planted_before_a_restart_is_reported_forged_not_delivered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "pi_authorizer")
    disk, clock = FullDisk(errno.EIO), ManualClock(1_800_000_000.0)
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as node:
        write_request(node.root, S, "restarted")
        await wait_for(lambda: "answer_failed" in node.kinds(), what="the failed write reported")
    node.history.close()
    response_path(node.root, S, "restarted").write_bytes(PLANTED)
    disk.full = False
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as again:
        await rescanned_until(clock, lambda: "forged" in again.kinds(), what="the forgery reported")
        assert "answered" not in again.kinds()
    assert "FORGED RESPONSE" in caplog.text
    rows = again.history.query()
    assert not [r for r in rows if r.written == 1], rows
    assert response_path(again.root, S, "restarted").read_bytes() == PLANTED


async def test_this_nodes_own_response_found_at_a_restart_is_its_delivered_verdict(tmp_path: Path) -> None:
    """The same check passes this node's own bytes (an earlier run placed them, then stopped)."""
    disk, clock = FullDisk(errno.EIO), ManualClock(1_800_000_000.0)
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as node:
        write_request(node.root, S, "own")
        await wait_for(lambda: "answer_failed" in node.kinds(), what="the failed write reported")
    recorded = node.history.recorded_verdicts(S, ["own"])["own"].body
    node.history.close()
    response_path(node.root, S, "own").write_bytes(recorded)
    disk.full = False
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as again:
        await rescanned_until(
            clock, lambda: not (session_dir(again.root, S) / "requests" / "own.json").exists(),
            what="the answered request removed")
        assert "forged" not in again.kinds()
    rows = again.history.query()
    assert len(rows) == 1 and rows[0].written == 1, rows


# -- smaller ones (finding 7) -------------------------------------------------------------------------


def write_long_request(root: Path, request_id: str) -> None:
    """A request whose name is 255 bytes (NAME_MAX): written under a short temp name, then renamed."""
    requests = session_dir(root, S) / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    temp = requests / "short.tmp"
    temp.write_bytes(json.dumps(request_body(request_id, S)).encode())
    temp.rename(requests / f"{request_id}.json")


@pytest.mark.parametrize("disk", [DiskWriter(), NamedTemps()], ids=["anonymous", "named-temps"])
async def test_a_request_named_with_255_bytes_is_answered(tmp_path: Path, disk: DiskWriter) -> None:
    request_id = "a" * (255 - len(".json"))
    store = HistoryStore.in_state_dir(tmp_path / "state")
    async with Served(tmp_path, DenyingArbiter(), ledger=store, writer=disk) as served:
        write_long_request(served.root, request_id)
        body = await read_response_when_written(served.root, S, request_id)
        assert body["state"] == "denied_with_reason" and "quarantined" not in served.kinds()
    store.close()


async def test_a_recorded_verdict_of_a_255_byte_name_is_republished(tmp_path: Path) -> None:
    request_id = "b" * (255 - len(".json"))
    disk, clock = FullDisk(errno.ENOSPC), ManualClock(1_800_000_000.0)
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as node:
        write_long_request(node.root, request_id)
        await wait_for(lambda: "answer_failed" in node.kinds(), what="the failed write reported")
        disk.full = False
        await rescanned_until(clock, response_path(node.root, S, request_id).exists, what="the response")
        assert "quarantined" not in node.kinds()


async def test_an_unusable_request_is_answered_once_the_disk_heals_before_it_is_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its explained denial cannot be written on a full disk: the file waits in place (not set aside
    unanswered), and is answered, then quarantined, once the disk heals."""
    caplog.set_level(logging.WARNING, "pi_authorizer")
    disk, clock = FullDisk(errno.ENOSPC), ManualClock(1_800_000_000.0)
    async with Node(tmp_path, DenyingArbiter(clock), disk, clock) as node:
        write_request_bytes(node.root, S, "broken.json", b'{"id": "broken", truncated')
        await wait_for(lambda: "waiting for disk" in caplog.text, what="the wait logged")
        await rescans(clock, 20)
        assert "quarantined" not in node.kinds() and not quarantined(node.state)
        assert (session_dir(node.root, S) / "requests" / "broken.json").exists()
        disk.full = False
        await rescanned_until(clock, response_path(node.root, S, "broken").exists, what="the denial")
        body = await read_response_when_written(node.root, S, "broken")
        assert body["state"] == "denied_with_reason" and body["decidedBy"]["kind"] == "gate_error"
        await wait_for(lambda: "quarantined" in node.kinds(), what="then set aside")
        # Its row was written before its first try (the history works): one row, however many tries.
        node.history.write_arrivals()
        rows = [(r.request_name, r.outcome) for r in node.history.query()]
        assert rows == [("broken.json", "quarantined")], rows
