"""The fakes the tests drive the shipped seams with, shipped beside them (as `trio.testing` is): a clock
that moves only when told, disks that fail or hold like a broken or slow one, and the other stand-ins a
test passes in through `core.seams.Seams` instead of patching a module.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from core.disk.anonymous import Staged
from core.disk.tree import UnsafeFolder
from core.disk.writer import DiskWriter
from core.history import HistoryStore
from core.person import GrantBook
from core.serving.verdicts import VerdictRecord, VerdictRow, WrittenMark
from core.vocabulary.asks import ArbiterDecision, Ask, AskKey, Decision, Judgment
from core.vocabulary.events import ServeEvent
from core.wire.decisions import RuleDecision, UserDecision
from core.wire.request import ParsedRequest, SessionGrant
from core.wire.response import approve, deny


class ManualClock:
    """A clock that moves only when told: tests, screenshots and simulations that must be reproducible."""

    def __init__(self, wall: float = 1_700_000_000.0, monotonic: float = 1_000.0) -> None:
        self._wall = wall
        self._monotonic = monotonic
        #: Waits in progress: (monotonic deadline, its loop, the event set when the deadline is reached).
        self._waits: list[tuple[float, asyncio.AbstractEventLoop, asyncio.Event]] = []
        #: Worker threads sleeping: (monotonic deadline, the event set when it is reached); the lock orders
        #: a sleep's registration against `advance` from another thread, so no wake-up is missed.
        self._sleeps: list[tuple[float, threading.Event]] = []
        self._lock = threading.Lock()

    def wall(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._monotonic

    @property
    def waiting(self) -> int:
        """How many waits and sleeps are in progress (a test advances once the code under test waits)."""
        return len(self._waits) + len(self._sleeps)

    @property
    def pending(self) -> int:
        """Waits still in progress whose interval has not passed: once a test's `advance` has been taken
        by the code under test, none that it woke is left (the next `advance` is not taken twice)."""
        return sum(1 for deadline, _, _ in self._waits if deadline > self._monotonic) + sum(
            1 for deadline, _ in self._sleeps if deadline > self._monotonic)

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        """Ends when `event` is set, or when `advance` has moved monotonic time `seconds` on."""
        due = asyncio.Event()
        entry = (self._monotonic + seconds, asyncio.get_running_loop(), due)
        self._waits.append(entry)
        try:
            if self._monotonic < entry[0]:
                waiters = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(due.wait())]
                try:
                    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        finally:
            self._waits.remove(entry)
        return event.is_set()

    def sleep(self, seconds: float) -> None:
        """Blocks this worker thread until `advance` has moved monotonic time `seconds` on (the loop
        goes on: the test advancing runs there)."""
        due = threading.Event()
        with self._lock:
            entry = (self._monotonic + seconds, due)
            if entry[0] <= self._monotonic:
                return
            self._sleeps.append(entry)
        try:
            due.wait()
        finally:
            with self._lock:
                self._sleeps.remove(entry)

    def advance(self, seconds: float) -> None:
        """Move both clocks on; waits and sleeps whose interval has passed end (from any thread)."""
        with self._lock:
            self._wall += seconds
            self._monotonic += seconds
            for deadline, due_sleep in self._sleeps:
                if deadline <= self._monotonic:
                    due_sleep.set()
        for deadline, loop, due in list(self._waits):
            if deadline <= self._monotonic and not loop.is_closed():
                loop.call_soon_threadsafe(due.set)

    def jump_wall(self, seconds: float) -> None:
        """Step only the wall clock (NTP, a person setting the time): monotonic time does not move."""
        self._wall += seconds


class FailingDisk(DiskWriter):
    """Fails the next `failures` publications (or every one, with -1) with `code`, then works."""

    def __init__(self, code: int, failures: int) -> None:
        self.code, self.failures, self.attempts = code, failures, 0

    def place(self, dir_fd: int, staged: Staged, target: str) -> bool:
        self.attempts += 1
        if self.failures != 0:
            self.failures -= 1
            raise OSError(self.code, os.strerror(self.code))
        return super().place(dir_fd, staged, target)



class LedgerOver:
    """A real history as the ledger, every call passed on to it: the ledgers below change one or two."""

    def __init__(self, store: HistoryStore) -> None:
        self.store = store

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        self.store.record_verdicts(verdicts)

    def expect(self, key: AskKey) -> None:
        self.store.expect(key)

    def mark_written(self, marks: Sequence[WrittenMark]) -> None:
        self.store.mark_written(marks)

    def record_quarantined(self, event: ServeEvent) -> None:
        self.store.record_quarantined(event)

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, VerdictRow]:
        return self.store.recorded_verdicts(session_id, request_ids)

    def note_set_aside_answered(self, key: AskKey, raw: bytes) -> None:
        self.store.note_set_aside_answered(key, raw)

    def set_aside_answered(self, key: AskKey, raw: bytes) -> bool:
        return self.store.set_aside_answered(key, raw)


class FailingLedger(LedgerOver):
    """A real history whose verdict writes fail (`sqlite3.OperationalError`) `failures` times, and
    whose notes of written responses fail `mark_failures` times."""

    def __init__(
        self, store: HistoryStore, failures: int, error: str = "disk I/O error", mark_failures: int = 0
    ) -> None:
        super().__init__(store)
        self.failures, self.error, self.attempts = failures, error, 0
        self.mark_failures, self.mark_attempts = mark_failures, 0

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        self.attempts += 1
        if self.failures != 0:
            self.failures -= 1
            raise sqlite3.OperationalError(self.error)
        super().record_verdicts(verdicts)

    def mark_written(self, marks: Sequence[WrittenMark]) -> None:
        self.mark_attempts += 1
        if self.mark_failures != 0:
            self.mark_failures -= 1
            raise sqlite3.OperationalError(self.error)
        super().mark_written(marks)



class ThreadNotingLedger(LedgerOver):
    """A real history that notes the thread each intake's lookup (`recorded_verdicts`) and each
    batch's record (`record_verdicts`) ran on."""

    def __init__(self, store: HistoryStore) -> None:
        super().__init__(store)
        self.lookups: list[str] = []
        self.records: list[str] = []

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        self.records.append(threading.current_thread().name)
        super().record_verdicts(verdicts)

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, VerdictRow]:
        self.lookups.append(threading.current_thread().name)
        return super().recorded_verdicts(session_id, request_ids)


class StuckRequests(DiskWriter):
    """A disk where removing the named answered requests fails (`EACCES`, as a folder whose mode
    changed under serving), `times` times each; everything else works."""

    def __init__(self, names: set[str], times: int = 1) -> None:
        self.left = dict.fromkeys(names, times)

    def remove_request(self, dir_fd: int, name: str) -> None:
        if self.left.get(name, 0) > 0:
            self.left[name] -= 1
            raise PermissionError(errno.EACCES, "Permission denied", name)
        super().remove_request(dir_fd, name)


class HeldDisk(FailingDisk):
    """Fails the next `failures` placements with `code` (none unless told); its batches wait at
    `staged` until released."""

    def __init__(self, code: int = errno.EIO, failures: int = 0) -> None:
        super().__init__(code, failures)
        self.entered, self.release = threading.Event(), threading.Event()

    def fault(self, checkpoint: str) -> None:
        if checkpoint == "staged" and not self.release.is_set():
            self.entered.set()
            self.release.wait(30)


class Breakable:
    """The history's fault hook: while `broken`, every write transaction fails like a broken disk."""

    def __init__(self) -> None:
        self.broken = False

    def __call__(self, stage: str) -> None:
        if self.broken and stage == "history":
            raise sqlite3.OperationalError("disk I/O error")


# -- serving's fakes: disks, fault hooks, ledgers and judges a serving core is driven with ----------


class HeldAt:
    """A fault hook: the first batch (or hold) to reach `checkpoint` waits there until released."""

    def __init__(self, checkpoint: str = "staged") -> None:
        self.checkpoint = checkpoint
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, checkpoint: str) -> None:
        if checkpoint == self.checkpoint and not self.release.is_set():
            self.entered.set()
            self.release.wait(30)


class NamedTemps(DiskWriter):
    """A filesystem without `O_TMPFILE` (or no procfs): every response is staged as a named temp."""

    anonymous = False


class FlushCountingDisk(DiskWriter):
    """A real disk that notes every flush a response is given (its staged file made durable, a whole
    filesystem's `syncfs`, a folder's fsync): what an answer costs in flushes, observed, not assumed."""

    def __init__(self) -> None:
        self.flushes: list[str] = []
        self._noted = threading.Lock()

    def _note(self, what: str) -> None:
        with self._noted:
            self.flushes.append(what)

    def stage(self, dir_fd: int, name: str, data: bytes, sync: bool) -> Staged:
        if sync:
            self._note("file")
        return super().stage(dir_fd, name, data, sync)

    def sync_file(self, dir_fd: int, staged: Staged) -> None:
        self._note("file")
        super().sync_file(dir_fd, staged)

    def sync_all(self, dir_fd: int) -> bool:
        self._note("filesystem")
        return super().sync_all(dir_fd)

    def fsync_dir(self, dir_fd: int) -> None:
        self._note("folder")
        super().fsync_dir(dir_fd)


class GatedDisk(DiskWriter):
    """A disk where every response file waits, in its worker thread, until the test opens the gate
    (slow hardware, a saturated device). A write that was not let through after `HANG_GUARD_S`
    goes on and is counted as forced: it held up whatever waited for the gate."""

    HANG_GUARD_S = 60.0

    def __init__(self) -> None:
        self.entered, self.gate, self.forced = threading.Event(), threading.Event(), 0

    def _wait(self) -> None:
        self.entered.set()
        if not self.gate.wait(self.HANG_GUARD_S):
            self.forced += 1

    def stage(self, dir_fd: int, name: str, data: bytes, sync: bool) -> Staged:
        self._wait()
        return super().stage(dir_fd, name, data, sync)

    def write_new(self, dir_fd: int, name: str, data: bytes) -> None:
        self._wait()
        super().write_new(dir_fd, name, data)

    def write_unsynced(self, dir_fd: int, name: str, data: bytes) -> None:
        self._wait()
        super().write_unsynced(dir_fd, name, data)


class GatedGrantBook:
    """A real grant book whose refusal check waits, on the thread that runs it, until the test opens
    the gate: a check over thousands of agent files, held for as long as the test needs to see what
    goes on meanwhile. Recording and judging are the real book's."""

    HANG_GUARD_S = 60.0

    def __init__(self, book: GrantBook) -> None:
        self.book = book
        self.entered, self.gate = threading.Event(), threading.Event()
        self.on_loop_thread: bool | None = None

    def refusal(self, agent_name: str, grants: Sequence[SessionGrant]) -> str | None:
        self.on_loop_thread = _on_a_running_loop()
        self.entered.set()
        self.gate.wait(self.HANG_GUARD_S)
        return self.book.refusal(agent_name, grants)

    def record(self, session_id: str, grants: Sequence[SessionGrant], agent_name: str) -> None:
        self.book.record(session_id, grants, agent_name)

    def judge(
        self, parsed: ParsedRequest, session_id: str, extra: Sequence[SessionGrant] = (),
        preview: bool = False, written: tuple[Path, str] | None = None,
    ) -> Judgment:
        return self.book.judge(parsed, session_id, extra, preview, written)


def _on_a_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class LinkedAwayDisk(DiskWriter):
    """Every batch placement fails (EIO), so the verdict is recorded but not visible; then the next
    `refusals` single writes (the republishing of that recorded verdict) find `responses/` refused."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals

    def place(self, dir_fd: int, staged: Staged, target: str) -> bool:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def link(self, dir_fd: int, source: str, target: str) -> None:
        if self.refusals > 0:
            self.refusals -= 1
            raise UnsafeFolder("sessions/x/responses", "is a symbolic link; not followed")
        super().link(dir_fd, source, target)


class PoisonLedger(LedgerOver):
    """A real history that refuses any transaction holding one request's verdict."""

    def __init__(self, store: HistoryStore, poison: str) -> None:
        super().__init__(store)
        self.poison, self.refused = poison, 0

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        if any(v.request_id == self.poison for v in verdicts):
            self.refused += 1
            raise ValueError("this verdict cannot be stored")
        super().record_verdicts(verdicts)


class AllowAll:
    """Recorded authority that approves everything: a link redirecting it would forge approvals."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        return Judgment("allow", RuleDecision(surface="bash", pattern="*", origin="global"))


class FullDisk(DiskWriter):
    """A disk that is full (or failing with `code`) while `full` is set: every write that needs new
    space (a new file, a temp, a link) fails; `overwrite` of an
    existing file in place, which needs none, still works. `attempts` counts the refused writes."""

    def __init__(self, code: int = errno.ENOSPC, full: bool = True) -> None:
        self.code, self.full, self.attempts = code, full, 0

    def _refuse(self) -> None:
        if self.full:
            self.attempts += 1
            raise OSError(self.code, os.strerror(self.code))

    def stage(self, dir_fd: int, name: str, data: bytes, sync: bool) -> Staged:
        self._refuse()
        return super().stage(dir_fd, name, data, sync)

    def place(self, dir_fd: int, staged: Staged, target: str) -> bool:
        self._refuse()
        return super().place(dir_fd, staged, target)

    def write_new(self, dir_fd: int, name: str, data: bytes) -> None:
        self._refuse()
        super().write_new(dir_fd, name, data)

    def write_unsynced(self, dir_fd: int, name: str, data: bytes) -> None:
        self._refuse()
        super().write_unsynced(dir_fd, name, data)

    def link(self, dir_fd: int, source: str, target: str) -> None:
        self._refuse()
        super().link(dir_fd, source, target)

    def replace(self, dir_fd: int, name: str, data: bytes) -> None:
        self._refuse()
        super().replace(dir_fd, name, data)


class ScriptedArbiter:
    """An arbiter whose verdicts a test scripts: `script(ask)` says `allow`, `deny` or `None` (hold it,
    as a person who has not looked yet). Keeps what it was asked and every withdrawal with its reason,
    so a test sees an ask "decided elsewhere" on this node."""

    def __init__(self, name: str, script: Callable[[Ask], str | None]) -> None:
        self.name = name
        self.script = script
        self.asked: list[AskKey] = []
        self.withdrawn: dict[AskKey, str | None] = {}
        self.held: dict[AskKey, asyncio.Future[ArbiterDecision]] = {}
        self.shown: dict[AskKey, Ask] = {}

    def decide(self, ask: Ask) -> asyncio.Future[ArbiterDecision]:
        self.asked.append(ask.key)
        future: asyncio.Future[ArbiterDecision] = asyncio.get_running_loop().create_future()
        self.shown[ask.key] = ask
        verdict = self.script(ask)
        if verdict is None:
            self.held[ask.key] = future
        else:
            future.set_result(self._decision(ask, verdict))
        return future

    def release(self, key: AskKey, verdict: str) -> None:
        """The person decides a held ask now."""
        self.held.pop(key).set_result(self._decision(self.shown[key], verdict))

    def _decision(self, ask: Ask, verdict: str) -> Decision:
        now = int(time.time() * 1000)
        source = UserDecision(via="dialog")
        if verdict == "allow":
            response = approve(responder=ask.responder_session_id, at_ms=now, decided_by=source)
        else:
            response = deny(responder=ask.responder_session_id, at_ms=now, decided_by=source,
                            reason=f"denied by {self.name}")
        return Decision(response, "user")

    def withdraw(self, key: AskKey, reason: str | None = None) -> None:
        self.withdrawn[key] = reason
        held = self.held.pop(key, None)
        if held is not None:
            held.cancel()
