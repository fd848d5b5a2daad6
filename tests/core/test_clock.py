import asyncio
import contextlib
import errno
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path

from core.clock import SYSTEM_CLOCK, wall_ms
from core.disk.writer import DISK, DiskWriter
from core.forwarding.watch import _UNSAFE_RETRY_S
from core.history import HistoryStore
from core.seams import Seams
from core.serving import ServingCore
from core.serving.loop import SAFETY_RESCAN_S
from core.serving.verdicts import Ledger
from core.testing import FailingDisk, FailingLedger, ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import (
    needs_inotify,
    poll_until,
    read_response_when_written,
    response_path,
    wait_for,
    write_request,
)


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(wall=10.0, monotonic=5.0)
    assert (clock.wall(), clock.monotonic()) == (10.0, 5.0)
    clock.advance(1.5)
    assert (clock.wall(), clock.monotonic(), wall_ms(clock)) == (11.5, 6.5, 11_500)


def test_system_monotonic_never_goes_back() -> None:
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first
    assert wall_ms(SYSTEM_CLOCK) > 1_600_000_000_000


def test_a_manual_sleep_blocks_its_thread_until_the_clock_passes_it() -> None:
    clock = ManualClock()
    clock.sleep(0.0)  # nothing to wait for
    sleeper = threading.Thread(target=clock.sleep, args=(30.0,))
    sleeper.start()
    poll_until(lambda: clock.waiting == 1, what="the thread sleeping")
    clock.advance(29.0)
    assert clock.waiting == 1 and sleeper.is_alive()
    clock.advance(1.0)
    sleeper.join(30)  # a hang guard
    assert not sleeper.is_alive() and clock.waiting == 0


# --------------------------------------------------------------------------------------------------
# The serving loop's waits run on the injected clock: the safety rescan, the retry while `sessions/` is a
# link, the backoff before a failed answer is retried, and the publisher's retries of a response write, a
# record and a note of what was written (its worker thread sleeps on the clock). A `ManualClock` ends each
# wait when advanced, so no test waits for real time to pass, and none is decided by how fast the machine is.


S = "019ff969-c34c-70be-9034-fae19c852932"


@needs_inotify
async def test_the_safety_rescan_and_the_unsafe_sessions_retry_wait_on_the_clock(tmp_path: Path) -> None:
    """While `sessions/` is a link nothing is watched; once it is a folder, only the safety rescan finds a
    request (no watch exists to report it) and only the watcher's retry starts watching again."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "sessions").symlink_to(elsewhere)
    clock = ManualClock()
    core = ServingCore(root, tmp_path / "state", DenyingArbiter(clock), seams=Seams(clock=clock))
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        # The heartbeat, the safety rescan and the watcher's retry: every loop parked on the clock.
        await wait_for(lambda: clock.waiting == 3, what="the three waits on the clock")
        (root / "sessions").unlink()
        write_request(root, S, "found")
        assert clock.waiting == 3 and not response_path(root, S, "found").exists()
        clock.advance(SAFETY_RESCAN_S)
        assert (await read_response_when_written(root, S, "found"))["state"] == "denied_with_reason"
        clock.advance(_UNSAFE_RETRY_S - SAFETY_RESCAN_S)  # the watcher's retry: the folder is watched
        await wait_for(lambda: clock.waiting == 2, what="the watcher watching, the others parked")
        write_request(root, S, "watched")  # answered with no further advance: by the watch
        assert (await read_response_when_written(root, S, "watched"))["state"] == "denied_with_reason"
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)  # a hang guard


class BrokenLinkOnce(DiskWriter):
    """The first publication's `link` fails with EIO (a disk hiccup), then the disk works."""

    def __init__(self) -> None:
        self.failures = 1

    def link(self, dir_fd: int, source: str, target: str) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        super().link(dir_fd, source, target)


@needs_inotify
async def test_a_rejected_requests_answer_is_retried_after_its_backoff_on_the_clock(tmp_path: Path) -> None:
    root = tmp_path / "root"
    clock = ManualClock()
    disk = BrokenLinkOnce()
    seams = Seams(clock=clock, disk=disk, retry_delays=(30.0,))
    core = ServingCore(root, tmp_path / "state", DenyingArbiter(clock), seams=seams)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        await wait_for(lambda: clock.waiting == 2, what="the heartbeat and the safety rescan parked")
        write_request(root, S, "bad", createdAt="yesterday")
        await wait_for(lambda: disk.failures == 0 and clock.waiting == 3, what="the retry waits")
        clock.advance(29.0)  # the safety rescan runs meanwhile; the retry still waits
        assert not response_path(root, S, "bad").exists()
        clock.advance(1.0)
        body = await read_response_when_written(root, S, "bad")
        assert body["decidedBy"]["kind"] == "gate_error" and "createdAt" in body["denialReason"]
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)  # a hang guard


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, clock: ManualClock, retry_delays: tuple[float, ...], ledger: Ledger | None = None,
    writer: DiskWriter = DISK,
) -> AsyncIterator[Path]:
    """A core on `clock`, its heartbeat and safety rescan parked on it; yields the root."""
    root = tmp_path / "root"
    seams = Seams(clock=clock, disk=writer, retry_delays=retry_delays)
    core = ServingCore(root, tmp_path / "state", DenyingArbiter(clock), ledger=ledger, seams=seams)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        await wait_for(lambda: clock.waiting == 2, what="the heartbeat and the safety rescan parked")
        yield root
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)  # a hang guard


@needs_inotify
async def test_a_failed_response_write_is_retried_after_its_backoff_on_the_clock(tmp_path: Path) -> None:
    """The publisher's worker thread sleeps on the clock; the loop goes on meanwhile (a rejected request
    is answered while the retry waits)."""
    clock = ManualClock()
    disk = FailingDisk(errno.EIO, failures=1)
    async with serving(tmp_path, clock, writer=disk, retry_delays=(30.0, 60.0)) as root:
        write_request(root, S, "eio")
        await wait_for(lambda: disk.attempts == 1 and clock.waiting == 3, what="the retry sleeping")
        write_request(root, S, "bad", createdAt="yesterday")
        assert (await read_response_when_written(root, S, "bad"))["decidedBy"]["kind"] == "gate_error"
        clock.advance(29.0)  # the safety rescan runs meanwhile; the retry still sleeps
        await wait_for(lambda: clock.waiting == 3, what="the safety rescan parked again")
        assert disk.attempts == 1 and not response_path(root, S, "eio").exists()
        clock.advance(1.0)
        body = await read_response_when_written(root, S, "eio")
        assert body["state"] == "denied_with_reason" and disk.attempts == 2


@needs_inotify
async def test_a_failed_record_is_retried_after_its_backoff_on_the_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    store = HistoryStore.in_state_dir(tmp_path / "state", seams=Seams(clock=clock))
    ledger = FailingLedger(store, failures=1)
    async with serving(tmp_path, clock, ledger=ledger, retry_delays=(30.0,)) as root:
        write_request(root, S, "flaky")
        await wait_for(lambda: ledger.attempts == 1 and clock.waiting == 3, what="the retry sleeping")
        clock.advance(29.0)
        await wait_for(lambda: clock.waiting == 3, what="the safety rescan parked again")
        assert ledger.attempts == 1 and not store.query() and not response_path(root, S, "flaky").exists()
        clock.advance(1.0)
        body = await read_response_when_written(root, S, "flaky")
        assert body["decidedBy"]["kind"] == "unavailable" and ledger.attempts == 2  # recorded, not fail-safe
        await wait_for(lambda: [r.written for r in store.query()] == [1], what="recorded and noted")


@needs_inotify
async def test_a_failed_note_of_a_written_response_is_retried_on_the_clock(tmp_path: Path) -> None:
    """A visible response whose note fails once ends noted (`written == 1`), not recorded as unwritten."""
    clock = ManualClock()
    store = HistoryStore.in_state_dir(tmp_path / "state", seams=Seams(clock=clock))
    ledger = FailingLedger(store, failures=0, mark_failures=1)
    async with serving(tmp_path, clock, ledger=ledger, retry_delays=(30.0,)) as root:
        write_request(root, S, "noted")
        await read_response_when_written(root, S, "noted")
        await wait_for(lambda: ledger.mark_attempts == 1 and clock.waiting == 3, what="the retry sleeping")
        [row] = store.query()
        assert row.written is None
        clock.advance(30.0)
        await wait_for(lambda: [r.written for r in store.query()] == [1], what="the response noted")
        assert ledger.mark_attempts == 2
