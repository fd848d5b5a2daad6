"""No single file stops serving (issue 33, item 6): a heartbeat is its writer's claim, and a "second
server" is believed only for a live process of this user that is not this node and not pid 1, while its
heartbeat is fresh (never dated ahead beyond a small skew) or it is seen writing answers. A session that
another server really answers is taken and waited for, never given up for good; the person can take
it over with one deliberate call (`Sessions.take_over`)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from pathlib import Path

import pytest

from core.forwarding.liveness import (
    FUTURE_SKEW_MS,
    HeartbeatRecord,
    heartbeat_path,
    not_a_server,
    read_heartbeat,
)
from core.serving.sessions import EMPTY_TEMP_S, WRITER_BELIEVED_S
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import Served, read_response_when_written, rescanned_until, response_path, write_request
from tests.history.support import S


def plant_heartbeat(root: Path, pid: int, ahead_ms: float = 0.0) -> Path:
    path = heartbeat_path(root, S)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"sessionId": S, "pid": pid, "updatedAt": int(time.time() * 1000 + ahead_ms)}
    temp = path.with_name(path.name + ".planted.tmp")
    temp.write_text(json.dumps(record))
    temp.rename(path)
    return path


def test_pid_1_another_users_and_future_records_are_no_server() -> None:
    now = time.time() * 1000
    assert not_a_server(1) is not None
    assert HeartbeatRecord(S, 1, now).state(now) == "dead_pid"
    assert HeartbeatRecord(S, os.getpid(), now + FUTURE_SKEW_MS / 2).state(now) == "alive"
    future = HeartbeatRecord(S, os.getpid(), now + 3_600_000)
    assert future.state(now) == "stale"
    assert future.doubt(now) == "its updatedAt is 3600 s in the future"


async def test_a_pid_1_heartbeat_dated_in_the_future_never_stops_serving(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    plant_heartbeat(tmp_path / "root", 1, ahead_ms=86_400_000)  # before serving starts
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        write_request(served.root, S, "first")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        assert (await read_response_when_written(served.root, S, "first"))["approved"] is False
        plant_heartbeat(served.root, 1, ahead_ms=86_400_000)  # and again while it serves
        for _ in range(3):
            clock.advance(1.0)
            await served.core.rescan_all()
        write_request(served.root, S, "second")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        await read_response_when_written(served.root, S, "second")
        assert "not_serving" not in served.kinds()
        record = read_heartbeat(heartbeat_path(served.root, S))
        assert record is not None and record.pid == os.getpid()  # this node's heartbeat, written over


async def test_a_live_processs_heartbeat_dated_an_hour_ahead_is_stale(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    clock = ManualClock(1_800_000_000.0)
    plant_heartbeat(tmp_path / "root", other.pid, ahead_ms=3_600_000)
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        write_request(served.root, S, "asked")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        await read_response_when_written(served.root, S, "asked")
        assert "not_serving" not in served.kinds()


async def test_an_empty_temp_file_named_for_pid_1_is_no_server(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        write_request(served.root, S, "before")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        await read_response_when_written(served.root, S, "before")
        responses = response_path(served.root, S, "before").parent
        (responses / "x.json.1.1800000000000.tmp").write_bytes(b"")
        for _ in range(3):
            clock.advance(1.0)
            await served.core.rescan_all()
        write_request(served.root, S, "after")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        await read_response_when_written(served.root, S, "after")
        assert "not_serving" not in served.kinds()


async def test_an_empty_temp_file_named_for_a_live_process_stops_nothing_for_long(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    """A writer's temp lives an instant; one that stays empty is a planted file, not a server."""
    clock = ManualClock(1_800_000_000.0)
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        write_request(served.root, S, "before")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        await read_response_when_written(served.root, S, "before")
        responses = response_path(served.root, S, "before").parent
        (responses / f"x.json.{other.pid}.1800000000000.tmp").write_bytes(b"")
        write_request(served.root, S, "after")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        await rescanned_until(clock, response_path(served.root, S, "after").exists, what="answered anyway")
        assert EMPTY_TEMP_S < WRITER_BELIEVED_S


async def test_a_live_server_at_start_is_waited_for_not_given_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, other: subprocess.Popen[bytes]
) -> None:
    """`serve` takes the session, says once that another server answers it, and serves it once that
    server is gone (before: `SessionHeld`, and the session was never served again)."""
    caplog.set_level(logging.INFO, "pi_authorizer")
    clock = ManualClock(1_800_000_000.0)
    plant_heartbeat(tmp_path / "root", other.pid)
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        assert served.kinds().count("not_serving") == 1
        write_request(served.root, S, "theirs")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        for _ in range(3):
            plant_heartbeat(served.root, other.pid)
            clock.advance(1.0)
            await served.core.rescan_all()
        assert not response_path(served.root, S, "theirs").exists()
        assert served.kinds().count("not_serving") == 1  # said once
        assert caplog.text.count(f"another server answers session {S}") == 1
        [status] = served.core.served.statuses()
        assert status.other_server is not None and f"pid {other.pid}" in status.other_server  # evidence
        other.kill()
        other.wait()
        await rescanned_until(clock, response_path(served.root, S, "theirs").exists, what="served again")
        assert "serving_again" in served.kinds()


async def test_the_person_takes_the_inbox_over_with_one_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, other: subprocess.Popen[bytes]
) -> None:
    caplog.set_level(logging.INFO, "pi_authorizer")
    clock = ManualClock(1_800_000_000.0)
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock) as served:
        plant_heartbeat(served.root, other.pid)
        await rescanned_until(clock, lambda: "not_serving" in served.kinds(), what="the other server seen")
        write_request(served.root, S, "waiting")
        await served.core.rescan_all()  # the next listing too: the portable pass has no inotify
        clock.advance(1.0)
        await served.core.rescan_all()
        assert not response_path(served.root, S, "waiting").exists()
        words = served.core.served.take_over(S)
        assert words == f"pid {other.pid} (its heartbeat in serving/)"
        assert f"taken over by the person's key from pid {other.pid}" in caplog.text
        await rescanned_until(clock, response_path(served.root, S, "waiting").exists, what="answered here")
        plant_heartbeat(served.root, other.pid)  # the overruled server beats again: never believed again
        await rescanned_until(clock, lambda: (r := read_heartbeat(heartbeat_path(served.root, S))) is not None
                              and r.pid == os.getpid(), what="this node's heartbeat")
        assert served.kinds().count("not_serving") == 1
