"""Another server answering the same inbox (issue 21, finding 4): its fresh heartbeat naming a live pid
that is not this node's is detected within a heartbeat or two, reported as `another server answers
session S` (log line, `not_serving` event the app shows), and while it lasts this node neither
answers that inbox nor overwrites that heartbeat; once that server is gone, serving resumes."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from core.forwarding.liveness import heartbeat_path, read_heartbeat
from core.history import HistoryStore
from core.person import AskWithdrawn, DecisionRefused, Person
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import (
    Served,
    needs_inotify,
    read_response_when_written,
    rescanned_until,
    response_path,
    wait_for,
    write_request,
)
from tests.history.support import S


def plant_heartbeat(root: Path, pid: int) -> None:
    """The other server's heartbeat (as the reference writes it: a fresh `updatedAt`, its pid)."""
    path = heartbeat_path(root, S)
    record = {"sessionId": S, "pid": pid, "updatedAt": int(time.time() * 1000)}
    temp = path.with_name(path.name + ".planted.tmp")
    temp.write_text(json.dumps(record))
    temp.rename(path)


def seen_beating(root: Path, pid: int, seen: Callable[[], bool]) -> Callable[[], bool]:
    """`seen`, while the other server beats as a live one does (its heartbeat written again at each
    look): a beat of this node's in flight when the first was planted (its look made before) replaces
    it, as it would a real server's, whose next beat is then seen."""
    def beating() -> bool:
        if seen():
            return True
        plant_heartbeat(root, pid)
        return False
    return beating




async def test_another_live_server_on_the_inbox_is_reported_and_not_raced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, other: subprocess.Popen[bytes]
) -> None:
    caplog.set_level(logging.INFO, "pi_authorizer")
    clock = ManualClock(1_800_000_000.0)
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        write_request(served.root, S, "before")
        await read_response_when_written(served.root, S, "before")
        plant_heartbeat(served.root, other.pid)
        seen = "the other server seen"
        beating = seen_beating(served.root, other.pid, lambda: "not_serving" in served.kinds())
        await rescanned_until(clock, beating, what=seen)
        event = next(e for e in served.events if e.kind == "not_serving")
        assert event.reason is not None and f"another server answers session {S}" in event.reason
        assert f"another server answers session {S}" in caplog.text
        write_request(served.root, S, "theirs")
        for _ in range(5):
            plant_heartbeat(served.root, other.pid)  # the other server keeps beating
            clock.advance(1.0)
            await served.core.rescan_all()
        assert not response_path(served.root, S, "theirs").exists()  # not raced
        record = read_heartbeat(heartbeat_path(served.root, S))
        assert record is not None and record.pid == other.pid  # its heartbeat left alone
        other.kill()
        other.wait()
        await rescanned_until(clock, lambda: "serving_again" in served.kinds(), what="serving again")
        await rescanned_until(clock, response_path(served.root, S, "theirs").exists, what="answered")


@needs_inotify
async def test_another_process_writing_temps_in_responses_is_reported_and_not_raced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, other: subprocess.Popen[bytes]
) -> None:
    """The 20.7.3 in-pi server publishes no heartbeat: its temp names (`<id>.json.<pid>.<ms>.tmp`)
    in `responses/` name it."""
    caplog.set_level(logging.INFO, "pi_authorizer")
    clock = ManualClock(1_800_000_000.0)
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        write_request(served.root, S, "before")
        await read_response_when_written(served.root, S, "before")
        responses = response_path(served.root, S, "before").parent
        temp = responses / f"x.json.{other.pid}.1800000000000.tmp"
        temp.write_text("{}")  # what the other server's publish leaves for an instant
        temp.unlink()
        seen = "the other server seen"
        await rescanned_until(clock, lambda: "not_serving" in served.kinds(), what=seen)
        assert f"another server answers session {S} (pid {other.pid}" in caplog.text
        write_request(served.root, S, "theirs")
        for _ in range(5):
            clock.advance(1.0)
            await served.core.rescan_all()
        assert not response_path(served.root, S, "theirs").exists()
        other.kill()
        other.wait()
        await rescanned_until(clock, lambda: "serving_again" in served.kinds(), what="serving again")
        await rescanned_until(clock, response_path(served.root, S, "theirs").exists, what="answered")


async def test_a_persons_decision_is_not_written_while_another_server_answers(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    clock = ManualClock(1_800_000_000.0)
    person = Person(clock=clock)
    async with Served(tmp_path, person, clock=clock) as served:
        write_request(served.root, S, "shown")
        await wait_for(lambda: bool(person.pending()), what="the pending ask")
        plant_heartbeat(served.root, other.pid)
        beating = seen_beating(served.root, other.pid, lambda: "not_serving" in served.kinds())
        await rescanned_until(clock, beating, what="the other server seen")
        key = person.pending()[0].key
        with pytest.raises(DecisionRefused, match="another server answers session"):
            await person.approve_once(key)
        assert not response_path(served.root, S, "shown").exists()
        assert [a.key for a in person.pending()] == [key]  # still in its place
        other.kill()
        other.wait()
        await rescanned_until(clock, lambda: "serving_again" in served.kinds(), what="serving again")
        await person.approve_once(key)
        assert (await read_response_when_written(served.root, S, "shown"))["approved"] is True


async def test_a_denial_replaced_by_another_servers_answer_is_never_recorded_as_delivered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, other: subprocess.Popen[bytes]
) -> None:
    """The reference's publish renames over whatever is there: a denial this node placed can be replaced
    by the other server's approval before the child reads it. Its temp name says which answer it
    replaces; the history then says so, never "denied, written" (the issue: 19 of 1,178 asks)."""
    caplog.set_level(logging.INFO, "pi_authorizer")
    clock = ManualClock(1_800_000_000.0)
    store = HistoryStore.in_state_dir(tmp_path / "state")
    try:
        async with Served(tmp_path, DenyingArbiter(clock), ledger=store, clock=clock) as served:
            served.core.subscribe(store.observe)
            write_request(served.root, S, "raced")
            mine = await read_response_when_written(served.root, S, "raced")
            assert mine["approved"] is False
            await wait_for(lambda: _row(store, "raced")[2] == 1, what="this node's denial marked written")
            path = response_path(served.root, S, "raced")
            temp = path.with_name(f"{path.name}.{other.pid}.1800000000000.tmp")  # the other server's publish
            temp.write_text(json.dumps({"approved": True, "state": "approved"}))
            # Seen at once by inotify, or by the next listing where serving polls (the portable pass).
            contested = lambda: _row(store, "raced")[0] == "contested"  # noqa: E731
            await rescanned_until(clock, contested, what="the row contested")
            temp.rename(path)
            await served.core.rescan_all()  # a listing after the rename: still never "delivered"
            _, verdict, written, reason = _row(store, "raced")
            assert written == 0 and verdict == "denied_with_reason"
            assert reason is not None and f"another server (pid {other.pid})" in reason
            assert "contested" in served.kinds()
            assert f"another server answers session {S} (pid {other.pid}" in caplog.text
            # The session row: when and why this node was not the one answering.
            noted = lambda: any(r.outcome == "not-serving" for r in store.query())  # noqa: E731
            await wait_for(noted, what="a session row")
            [session_row] = [r for r in store.query() if r.outcome == "not-serving"]
            assert session_row.reason is not None
            assert session_row.reason.startswith(f"another server answers session {S} (pid {other.pid}")
    finally:
        store.close()


def _row(store: HistoryStore, request_id: str) -> tuple[str, str | None, int | None, str | None]:
    rows = [r for r in store.query() if r.request_id == request_id]
    assert len(rows) == 1, [(r.outcome, r.verdict, r.written) for r in rows]
    return rows[0].outcome, rows[0].verdict, rows[0].written, rows[0].reason


async def test_an_ask_another_server_answers_leaves_the_persons_queue_as_answered_elsewhere(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    """The issue: the other server's answers to asks shown here were called "withdrawn" (290 of them),
    as if the child had stopped waiting. Its temp name for the ask's response says otherwise."""
    clock = ManualClock(1_800_000_000.0)
    person = Person(clock=clock)
    gone: list[AskWithdrawn] = []
    person.subscribe(lambda event: gone.append(event) if isinstance(event, AskWithdrawn) else None)
    async with Served(tmp_path, person, clock=clock) as served:
        write_request(served.root, S, "shown")
        await wait_for(lambda: bool(person.pending()), what="the pending ask")
        path = response_path(served.root, S, "shown")
        temp = path.with_name(f"{path.name}.{other.pid}.1800000000000.tmp")  # the other server answers it
        temp.write_text(json.dumps({"approved": True, "state": "approved"}))
        await rescanned_until(clock, lambda: not person.pending(), what="the ask out of the queue")
        temp.rename(path)  # its publish completes
        await served.core.rescan_all()
        [event] = gone
        assert event.reason is not None and event.reason.startswith("answered by another server")
        assert "withdrawn" not in served.kinds()  # never reported as the child's withdrawal
        assert "forged" not in served.kinds()
        assert "contested" in served.kinds()
