"""Another server answering the same inbox (issue 21, finding 4): its fresh heartbeat naming a live pid
that is not this node's is detected within a heartbeat or two, reported as `another server answers
session S` (log line, `not_serving` event the app shows), and while it lasts this node neither
answers that inbox nor overwrites that heartbeat; once that server is gone, serving resumes."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.forwarding.liveness import heartbeat_path, read_heartbeat
from core.person import DecisionRefused, HumanAuthorizer
from core.serving.asks import DenyingArbiter
from core.testing import ManualClock
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


@pytest.fixture
def other() -> Iterator[subprocess.Popen[bytes]]:
    """A live process standing for the other server (its pid is what its heartbeat names)."""
    process = subprocess.Popen(["sleep", "300"])
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()


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
        await rescanned_until(clock, lambda: "not_serving" in served.kinds(), what=seen)
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
    human = HumanAuthorizer(clock=clock)
    async with Served(tmp_path, human, clock=clock) as served:
        write_request(served.root, S, "shown")
        await wait_for(lambda: bool(human.pending()), what="the pending ask")
        plant_heartbeat(served.root, other.pid)
        await rescanned_until(clock, lambda: "not_serving" in served.kinds(), what="the other server seen")
        key = human.pending()[0].key
        with pytest.raises(DecisionRefused, match="another server answers session"):
            await human.approve_once(key)
        assert not response_path(served.root, S, "shown").exists()
        assert [a.key for a in human.pending()] == [key]  # still in its place
        other.kill()
        other.wait()
        await rescanned_until(clock, lambda: "serving_again" in served.kinds(), what="serving again")
        await human.approve_once(key)
        assert (await read_response_when_written(served.root, S, "shown"))["approved"] is True
