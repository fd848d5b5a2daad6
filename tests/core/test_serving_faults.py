"""Faults while answering (issue 9 §4): disk full, EIO, a history that cannot be written, a read-only
state dir, an inbox deleted and recreated, a clock that jumps, forged responses, a killed holder.

Faults come through explicit seams: an injected `DiskWriter` that fails like a full or broken disk,
a ledger wrapper that fails like a broken history, an injected clock; never a patch of shipped code.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.forwarding.liveness import heartbeat_path, read_heartbeat
from core.history import HistoryStore
from core.person import DecisionRefused, Person
from core.serving import ServingCore
from core.testing import FailingDisk, FailingLedger, GatedDisk, HeldDisk, LinkedAwayDisk, ManualClock
from core.vocabulary.asks import DenyingArbiter, Judgment, LeavingArbiter
from core.vocabulary.events import ServeEvent
from core.wire.request import ParsedRequest
from tests.helpers import (
    Served,
    needs_inotify,
    needs_proc,
    poll_until,
    read_response_when_done,
    read_response_when_written,
    rescanned_until,
    response_path,
    session_dir,
    wait_for,
    write_request,
)
from tests.history.support import S

REPO = Path(__file__).resolve().parents[2]








async def test_disk_full_is_retried_and_the_child_answered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = FailingDisk(errno.ENOSPC, failures=2)
    caplog.set_level(logging.WARNING, "pi_authorizer")
    async with Served(tmp_path, DenyingArbiter(), writer=disk) as served:
        write_request(served.root, S, "full")
        body = await read_response_when_written(served.root, S, "full")
        assert body["state"] == "denied_with_reason" and disk.attempts == 3
        assert "No space left on device" in caplog.text and "retrying" in caplog.text
        responses = session_dir(served.root, S) / "responses"
        await wait_for(
            lambda: not [p for p in responses.iterdir() if p.suffix == ".tmp"], what="temps removed"
        )


@needs_inotify
async def test_eio_that_outlasts_the_retries_is_answered_once_the_disk_heals(tmp_path: Path) -> None:
    disk = FailingDisk(errno.EIO, failures=-1)
    clock = ManualClock(1_800_000_000.0)
    async with Served(tmp_path, DenyingArbiter(clock), writer=disk, clock=clock) as served:
        write_request(served.root, S, "eio")
        await wait_for(lambda: "answer_failed" in served.kinds(), what="the failure reported")
        assert not response_path(served.root, S, "eio").exists()
        disk.failures = 0  # the disk heals: no file event says so, the safety rescan serves it again
        await rescanned_until(clock, response_path(served.root, S, "eio").exists, what="the response")
        body = await read_response_when_written(served.root, S, "eio")
        assert body["state"] == "denied_with_reason"
        write_request(served.root, S, "after")
        await read_response_when_written(served.root, S, "after")


async def test_history_write_retried_then_recorded(tmp_path: Path) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    ledger = FailingLedger(store, failures=2)
    async with Served(tmp_path, DenyingArbiter(), ledger=ledger) as served:
        write_request(served.root, S, "flaky")
        body = await read_response_when_written(served.root, S, "flaky")
        assert body["decidedBy"]["kind"] == "unavailable" and ledger.attempts == 3
        await wait_for(lambda: bool(store.query()) and store.query()[0].written == 1, what="recorded")


async def test_history_that_cannot_be_written_still_answers_the_child_with_the_reason(tmp_path: Path) -> None:
    """A person's approval that cannot be recorded is never published: the child is denied, and told why."""
    store = HistoryStore.in_state_dir(tmp_path / "state")
    ledger = FailingLedger(store, failures=-1, error="attempt to write a readonly database")
    person = Person()
    async with Served(tmp_path, person, ledger=ledger) as served:
        write_request(served.root, S, "approve-me")
        await wait_for(lambda: bool(person.pending()), what="pending ask")
        with pytest.raises(Exception, match="history could not record"):
            await person.approve_once(person.pending()[0].key)
        body = await read_response_when_written(served.root, S, "approve-me")
        assert body["approved"] is False and body["state"] == "denied_with_reason"
        assert "readonly database" in body["denialReason"] and body["decidedBy"]["kind"] == "gate_error"
        assert not person.pending()


async def test_read_only_state_dir_still_answers_unusable_requests(tmp_path: Path) -> None:
    """The quarantine cannot be written (its folder is a file): the child is still answered, the
    file left in place is not served again and again, and serving goes on."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "quarantine").write_text("not a folder")
    if os.geteuid() != 0:
        state.chmod(0o500)
    try:
        async with Served(tmp_path, DenyingArbiter()) as served:
            bad = write_request(served.root, S, "bad", createdAt="yesterday")
            body = await read_response_when_written(served.root, S, "bad")
            assert body["decidedBy"]["kind"] == "gate_error" and "createdAt" in body["denialReason"]
            await wait_for(lambda: "quarantined" in served.kinds(), what="reported")
            assert bad.exists()
            write_request(served.root, S, "good")
            await read_response_when_written(served.root, S, "good")
            assert served.kinds().count("quarantined") == 1
    finally:
        state.chmod(0o700)


async def test_inbox_deleted_and_recreated_is_served_again(tmp_path: Path) -> None:
    async with Served(tmp_path, DenyingArbiter()) as served:
        write_request(served.root, S, "one")
        await read_response_when_done(served.root, S, "one")
        shutil.rmtree(session_dir(served.root, S))
        await asyncio.sleep(0)  # let the watcher see the folder go
        write_request(served.root, S, "two")
        assert (await read_response_when_done(served.root, S, "two"))["approved"] is False
        shutil.rmtree(served.root / "sessions")
        write_request(served.root, S, "three")
        await read_response_when_written(served.root, S, "three")


@needs_inotify
async def test_clock_jumps_change_nothing_but_timestamps(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        write_request(served.root, S, "before")
        assert (await read_response_when_written(served.root, S, "before"))[
            "respondedAt"
        ] == 1_800_000_000_000
        clock.jump_wall(-86_400 * 365)  # a year back
        write_request(served.root, S, "back")
        write_request(served.root, S, "bad1", createdAt=None)
        write_request(served.root, S, "bad2", createdAt=None)
        assert (await read_response_when_written(served.root, S, "back"))["respondedAt"] == 1_768_464_000_000
        await read_response_when_written(served.root, S, "bad2")
        clock.jump_wall(86_400 * 3650)  # ten years forward
        write_request(served.root, S, "forward")
        await read_response_when_written(served.root, S, "forward")
        await wait_for(lambda: len(served.core.quarantine.records()) == 2, what="both kept")


async def test_response_present_before_serving_is_reported_as_forged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    root = tmp_path / "root"
    caplog.set_level(logging.WARNING, "pi_authorizer")
    forged = b'{"approved":true,"state":"approved","responderSessionId":"' + S.encode() + b'"}'
    request = write_request(root, S, "self-approved")
    response_path(root, S, "self-approved").write_bytes(forged)
    async with Served(tmp_path, DenyingArbiter(), ledger=store) as served:
        served.core.subscribe(store.observe)
        await wait_for(lambda: "forged" in served.kinds(), what="forgery reported")
        await wait_for(lambda: not request.exists(), what="request set aside")
    assert "FORGED RESPONSE" in caplog.text
    [row] = store.query()
    assert row.outcome == "forged" and "FORGED RESPONSE" in (row.reason or "")
    assert response_path(root, S, "self-approved").read_bytes() == forged  # never rewritten
    assert any("FORGED" in str(r["reason"]) for r in served.core.quarantine.records())


async def test_response_appearing_while_a_person_decides_is_reported_as_forged(tmp_path: Path) -> None:
    person = Person()
    async with Served(tmp_path, person) as served:
        write_request(served.root, S, "waiting")
        await wait_for(lambda: bool(person.pending()), what="pending ask")
        response_path(served.root, S, "waiting").write_text('{"approved":true,"state":"approved"}')
        await served.core.rescan_all()
        assert "forged" in served.kinds() and not person.pending()


async def test_a_response_planted_while_an_answer_no_one_waits_on_is_committed_is_reported_as_forged(
    tmp_path: Path,
) -> None:
    forged = b'{"approved":true,"state":"approved","responderSessionId":"' + S.encode() + b'"}'
    root = tmp_path / "root"

    def plant(checkpoint: str) -> None:  # on the disk thread, once the batch is recorded
        if checkpoint == "recorded" and not response_path(root, S, "planted").exists():
            response_path(root, S, "planted").write_bytes(forged)

    async with Served(tmp_path, DenyingArbiter(), fault=plant) as served:  # the fail-safe decides
        request = write_request(served.root, S, "planted")
        await wait_for(lambda: "forged" in served.kinds(), what="forgery reported")
        await wait_for(lambda: not request.exists(), what="request set aside")
        reasons = [str(r["reason"]) for r in served.core.quarantine.records()]
    assert response_path(root, S, "planted").read_bytes() == forged  # never replaced
    assert any("before this node's verdict could be written" in reason for reason in reasons)
    assert "answered" not in served.kinds()


async def test_already_answered_id_is_set_aside_with_a_reason(tmp_path: Path) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    async with Served(tmp_path, DenyingArbiter(), ledger=store) as served:
        write_request(served.root, S, "once")
        await read_response_when_written(served.root, S, "once")
        response_path(served.root, S, "once").unlink()  # the child consumed it
        await wait_for(
            lambda: not (session_dir(served.root, S) / "requests" / "once.json").exists(),
            what="answered request removed",
        )
        replay = write_request(served.root, S, "once")
        await wait_for(lambda: not replay.exists(), what="replay set aside")
        assert not response_path(served.root, S, "once").exists()
        await wait_for(
            lambda: any("already answered" in str(r["reason"]) for r in served.core.quarantine.records()),
            what="reason kept",
        )


@needs_proc
def test_restart_takes_over_at_once_after_kill_9(tmp_path: Path) -> None:
    """The killed holder is not reaped yet (a zombie): its fresh heartbeat must not hold the session."""
    command = [
        sys.executable,
        "-m",
        "tui.cli",
        "serve",
        "--session",
        S,
        "--forwarding-root",
        str(tmp_path / "root"),
        "--create",
        "--state-dir",
        str(tmp_path / "state"),
        "--no-history",
        "--agent-dir",
        str(tmp_path),
        "--project",
        str(tmp_path),
    ]
    first = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    beat = heartbeat_path(tmp_path / "root", S)
    try:
        poll_until(lambda: beat.exists() or first.poll() is not None)
        record = read_heartbeat(beat)
        assert record is not None and record.pid == first.pid
        temp = beat.with_name(f"{beat.name}.{first.pid}.1.tmp")
        temp.write_bytes(b"{}")  # a temp file the killed writer left behind
        os.kill(first.pid, signal.SIGKILL)
        poll_until(lambda: _zombie_or_gone(first.pid))
        core = ServingCore(tmp_path / "root", tmp_path / "state", LeavingArbiter())
        core.add_session(S)  # not SessionHeld
        assert not temp.exists()
        core.served[S].lock.release()
    finally:
        first.kill()
        first.wait(10)


def _zombie_or_gone(pid: int) -> bool:
    try:
        return b") Z " in Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True



async def test_a_blocked_response_write_never_holds_up_the_loop(tmp_path: Path) -> None:
    """Blocking work runs off the event loop: while a response write hangs, the loop goes on (this
    test runs, a new request arrives, the heartbeat stands); on the loop the write would hold all
    of that up until the gate's hang guard, and count as forced."""
    root = tmp_path / "root"
    write_request(root, S, "first")
    disk = GatedDisk()
    async with Served(tmp_path, DenyingArbiter(), writer=disk) as served:
        await wait_for(disk.entered.is_set, what="a response write waiting at the gate")
        write_request(root, S, "second")
        # Read and judged (decided at once, its answer queued behind the hanging write: held meanwhile).
        await wait_for(lambda: served.core.served.by_id[S].judged("second.json"),
                       what="the next request read while the write waits")
        record = read_heartbeat(heartbeat_path(root, S))
        assert record is not None and record.pid == os.getpid()
        disk.gate.set()
        for request_id in ("first", "second"):
            assert (await read_response_when_written(root, S, request_id))["state"] == "denied_with_reason"
        assert not served.task.done()
    assert disk.forced == 0



async def test_a_recorded_verdict_refused_by_an_unsafe_folder_is_published_once_it_is_sound(
    tmp_path: Path,
) -> None:
    """Republishing after a failed write meets a refused folder: the request is served again once the
    folder is sound, never left marked as answered while nothing answered it."""
    store = HistoryStore.in_state_dir(tmp_path / "state")
    disk = LinkedAwayDisk(refusals=4)  # one republishing: the first attempt and its three retries
    clock = ManualClock(1_800_000_000.0)
    async with Served(tmp_path, DenyingArbiter(clock), ledger=store, writer=disk, clock=clock) as served:
        write_request(served.root, S, "stuck")
        # Neither the recorded verdict's republishing nor the sound folder has a file event: each is
        # the safety rescan's.
        await rescanned_until(clock, lambda: "unsafe_folder" in served.kinds(), what="the refused folder")
        await rescanned_until(clock, response_path(served.root, S, "stuck").exists, what="the response")
        body = await read_response_when_written(served.root, S, "stuck")
        assert body["decidedBy"]["kind"] == "unavailable" and disk.refusals == 0


async def test_a_persons_decision_that_cannot_be_written_keeps_the_ask_for_the_next_decision(
    tmp_path: Path,
) -> None:
    disk = FailingDisk(errno.EIO, failures=4)  # the batch's attempt and its three retries
    person = Person()
    async with Served(tmp_path, person, writer=disk) as served:
        write_request(served.root, S, "first")
        write_request(served.root, S, "second")
        await wait_for(lambda: len(person.pending()) == 2, what="two pending asks")
        key = person.pending()[0].key
        with pytest.raises(DecisionRefused, match="writing the response failed"):
            await person.approve_once(key)
        assert [a.key.name for a in person.pending()] == ["first.json", "second.json"]  # in its place
        assert not response_path(served.root, S, "first").exists()
        decided = await person.deny(key, "not this one")  # the disk healed: the next decision is written
        assert decided.kind == "denied_with_reason"
        body = await read_response_when_written(served.root, S, "first")
        assert body["denialReason"] == "not this one"
        assert served.kinds().count("answer_failed") == 1 and served.kinds().count("answered") == 1




async def test_an_ask_withdrawn_while_its_failed_decision_is_written_leaves_the_persons_queue(
    tmp_path: Path,
) -> None:
    """The child gives up while the person's decision is being written (on a disk that fails every
    write): the ask cannot be decided again, so it leaves the queue (it used to stay there,
    undecidable). The publisher looks for the request just before placing the answer, so it finds it
    gone and places nothing: the write is not even tried (campaign finding 5)."""
    disk = HeldDisk(failures=-1)
    person = Person()
    async with Served(tmp_path, person, writer=disk, fault=disk.fault) as served:
        request = write_request(served.root, S, "gone")
        await wait_for(lambda: bool(person.pending()), what="pending ask")
        approving = asyncio.ensure_future(person.approve_once(person.pending()[0].key))
        try:
            await wait_for(disk.entered.is_set, what="the decision's batch held")
            request.unlink()  # the child withdraws while its answer is being written
            await served.core.rescan_all()
        finally:
            disk.release.set()
        with pytest.raises(DecisionRefused, match="its child stopped waiting"):
            await asyncio.wait_for(approving, 30)
        assert not person.pending() and not response_path(served.root, S, "gone").exists()
        assert disk.attempts == 0  # nothing placed where nobody reads it


# --------------------------------------------------------------------------------------------------
# A file whose serving fails after its child withdrew it: nothing is written for it (the child is
# gone; a gate denial would be left behind under responses/), and serving goes on.


class WithdrawnThenFailing:
    """A judge during whose work the child withdraws the `doomed` request, then the judge fails."""

    def __init__(self, root: Path) -> None:
        self.requests = session_dir(root, S) / "requests"

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        if parsed.request.id == "doomed":
            (self.requests / "doomed.json").unlink()
            raise RuntimeError("the judge broke")
        return Judgment(verdict="ask")


async def test_serving_that_fails_after_the_child_withdrew_writes_no_response(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    events: list[ServeEvent] = []
    core = ServingCore(root, state, DenyingArbiter(), judge=WithdrawnThenFailing(root))
    core.subscribe(events.append)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        write_request(root, S, "doomed")
        await wait_for(lambda: any(e.kind == "quarantined" for e in events), what="the failure set aside")
        failed = next(e for e in events if e.kind == "quarantined")
        assert failed.reason is not None and "the judge broke" in failed.reason
        write_request(root, S, "next")  # serving goes on
        assert (await read_response_when_written(root, S, "next"))["approved"] is False
        assert not response_path(root, S, "doomed").exists()
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
