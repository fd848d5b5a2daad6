"""The publisher, the last stage of serving: history record → response file, a batch at a time.

Every answer ready at the same moment joins one batch (at most `MAX_BATCH`) that passes the checkpoints
of `CHECKPOINTS` in order, each a named point of the fault hook (`Seams.fault`, the seam crash tests
use; `docs/design/serving-speed.md` says what is true after each): `recorded`, every verdict in ONE fsynced
transaction (recorded before visible; a verdict the ledger refuses is replaced by a fail-safe denial
that says why, so nothing is approved without its record); `staged` and `durable`, each body in a temp
beside its target, made durable by one `syncfs` (an `fsync` each below `SYNCFS_FROM`) where it must be:
a new file whose verdict the history holds durably needs no flush of its own (a restart after a power
cut publishes it from the history, and takes what the cut left of it for ours:
`docs/design/reliability.md` § A response's own flush); `half-linked` and `linked`, each temp renamed to
`responses/<id>.json` without replacing (`renameat2(RENAME_NOREPLACE)`, else `link()`: nothing is
answered twice), each folder fsynced (where its files were), an answer whose request is gone just
before not placed (its child gave up: `Published.withdrawn`); `marked`, the ledger notes what was
written; `deleted`, the answered requests removed. A restart reconciles a stop between any two
checkpoints (`core.serving.reconcile`).

One disk thread (`on_disk`) runs a burst's disk work in order: the drain's intake reads, each batch's
commit, the removals. Measured (issue 23, `docs/design/serving-speed.md`): with the reads, the commits and the
removals each on a thread of its own, a 10,000-ask burst had no thread holding the interpreter lock
40% of its time, every short system call of one handing the lock to another and waiting to get it
back; taking turns on one thread, the same burst ran ~1.2× faster on a quarter less CPU per ask.

Every file operation goes through the `DiskWriter` seam, relative to a `responses/` (or `requests/`)
descriptor opened from the root down: no link is ever followed. What it records and reports is
`core.serving.verdicts`.

Size: one batch's checkpoints in order, with the loops each runs once per answer of a burst; split,
each part would pass the batch's state back and forth.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, TypeVar

from core.disk.entries import read_small, remove, temp_name, temp_suffix
from core.disk.tree import check_name, lstat_or_none
from core.disk.writer import DiskWriter
from core.forwarding.inbox import SessionInbox, display_name
from core.seams import PRODUCTION, FaultHook, Seams, no_fault
from core.serving.verdicts import BatchItem, Ledger, Published, VerdictRecord, WrittenMark, gate_denial
from core.text import log_safe
from core.vocabulary.asks import AskKey
from core.wire.response import encode_response

log = logging.getLogger("pi_authorizer.publish")
_T = TypeVar("_T")

MAX_BATCH = 1024
"""Answers per batch: bounds one batch's memory and the wait of its first answer."""
SYNCFS_FROM = 4
"""From this many response files in a batch, one `syncfs` beats an `fsync` per file."""
#: Refused notes of written responses kept to be noted with a later batch (beyond: a restart's).
UNNOTED_KEPT = 65536
CHECKPOINTS = ("arrived", "recorded", "staged", "durable", "half-linked", "linked", "marked", "deleted")
"""Fault points of a batch in order; at `arrived` the batch's asks are judged and reported, nothing
recorded."""
TRANSIENT = (OSError, sqlite3.OperationalError)
"""Failures worth retrying (a full or busy disk, a locked database), after `Seams.retry_delays`."""
Settled = Callable[[AskKey, Published], None]
"""Told, on the event loop, what became of an answer, before anyone waiting on it resumes."""
Removed = Callable[[Sequence[tuple[AskKey, Published]]], None]
BatchSettled = Callable[[Sequence[tuple[AskKey, Published]]], None]
"""`Settled` for a whole batch at once (one call, in the batch's order): a burst's reports, log lines
included, are made per batch instead of per answer."""
"""Told, on the event loop, which answered requests are gone from their inboxes (and by which answer)."""
Opened = Sequence[tuple[int, list[BatchItem]]]


class SettledBatch(NamedTuple):
    """What became of an intake's answers decided at once (`Publisher.settle`), in their order, and
    the names of the answered requests it removed (or found removed)."""

    published: list[Published]
    gone: frozenset[str]
"""Each session's `responses/` descriptor with the answers of the batch that go there."""


class Publisher:
    """Collects the answers ready at one moment and commits them together.

    `publish()` queues an answer and waits for its batch; one drain task per burst takes whatever is
    queued (up to `MAX_BATCH`), commits it on a worker thread, settles every answer of the batch and
    goes on while answers are queued. Cancelling a caller never strands the others.
    """

    def __init__(
        self,
        ledger: Ledger | None,
        seams: Seams = PRODUCTION,
        on_published: Settled | None = None,
        on_removed: Removed | None = None,
        on_batch: BatchSettled | None = None,
    ) -> None:
        self.ledger = ledger
        self.writer, self.clock, self.fault = seams.disk, seams.clock, seams.fault
        self.retry_delays = seams.retry_delays
        self.on_published = on_published
        self.on_removed = on_removed
        self.on_batch = on_batch
        #: The `done` of an answer no one waits on (`enqueue_unwaited`): already done, never set.
        self._unwaited: asyncio.Future[Published] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: list[BatchItem] = []
        self._room = asyncio.Event()
        self._drain: asyncio.Task[None] | None = None
        self._disk = ThreadPoolExecutor(1, thread_name_prefix="pi-authorizer-disk")
        self._removing: concurrent.futures.Future[None] | None = None
        #: Notes of written responses the history refused through every retry (a disk full for longer):
        #: noted with the next batch's, so a row is not left open until a restart (bounded).
        self._unnoted: list[WrittenMark] = []
        #: Works asked of the disk thread (`on_disk`) not finished yet.
        self._busy = 0
        #: The `settle`s asked for and not done: `close` lets them end.
        self._settling: set[asyncio.Future[SettledBatch]] = set()
        #: At a stop (`close`): when, on the clock's monotonic time, answers no one waits on are left.
        self._leave_after: float | None = None
        #: `close` has returned: the history may be closed next, so nothing more is recorded here.
        self._closed = False

    # -- on the event loop: the queue, a batch at a time ----------------------------------------

    async def publish(self, inbox: SessionInbox, verdict: VerdictRecord) -> Published:
        return await asyncio.shield(self.enqueue(inbox, verdict))

    def enqueue(self, inbox: SessionInbox, verdict: VerdictRecord) -> asyncio.Future[Published]:
        """`publish` without waiting (on the loop): the future is set when the answer's batch is done."""
        self._loop = asyncio.get_running_loop()
        done: asyncio.Future[Published] = self._loop.create_future()
        item = BatchItem(inbox, verdict, done)
        if self.ledger is not None:
            self.ledger.expect(verdict.key)
        self._queue.append(item)
        if self._drain is None or self._drain.done():
            self._drain = asyncio.ensure_future(self._draining())
        return done

    def enqueue_unwaited(self, inbox: SessionInbox, verdict: VerdictRecord) -> None:
        """`enqueue` an answer no one waits on (a rule's, the fail-safe's): no future of its own to
        create and set; what became of it reaches `on_published` / `on_batch` only."""
        unwaited = self.unwaited()
        if self.ledger is not None:
            self.ledger.expect(verdict.key)
        self._queue.append(BatchItem(inbox, verdict, unwaited))
        if self._drain is None or self._drain.done():
            self._drain = asyncio.ensure_future(self._draining())

    async def on_disk(self, work: Callable[..., _T], *args: object) -> _T:
        """`work(*args)` on the disk thread, after the disk work queued before it (see the module
        docstring); the drain reads its intakes through this."""
        return await self.submit(work, *args)

    def submit(self, work: Callable[..., _T], *args: object) -> asyncio.Future[_T]:
        """`on_disk`, queued now (on the loop): work asked for after it runs after it."""
        self._busy += 1
        done = asyncio.wrap_future(self._disk.submit(work, *args))
        done.add_done_callback(self._finished)
        return done

    def _finished(self, _: object) -> None:
        self._busy -= 1

    def idle(self) -> bool:
        """Nothing queued for the disk thread nor running there: work asked for now starts at once (a
        rescan's first intake is read there then, else on a thread of its own: a new ask is read while
        a write hangs or waits to be retried)."""
        return (self._busy == 0 and not self._queue
                and (self._removing is None or self._removing.done()))

    async def room(self) -> None:
        """Wait while a whole batch is already queued behind the one being committed (backpressure)."""
        while len(self._queue) >= MAX_BATCH:
            self._room.clear()
            await self._room.wait()

    async def close(self, leave_after: float | None = None) -> None:
        """Finish the batches queued and the removals asked for. With `leave_after` (a stop's grace, on
        the clock's monotonic time), the answers no one waits on (a rule's, a link's, the fail-safe's)
        whose batch has not begun by then are left (queued, or an intake's `settle` not begun on the
        disk thread): nothing recorded or written, their requests stay for the next start, which
        decides them again. A person's decision is still written. (On a full
        history each batch is retried for seconds before its fail-safe denials: a stop during a burst
        took over 30 s, and denied thousands of asks a next start could answer.)"""
        self._leave_after = leave_after
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await self._drain
        if self._settling:  # their reports are made as each ends
            await asyncio.wait(list(self._settling))
            await asyncio.sleep(0)
        if self._removing is not None and not self._removing.done():
            await asyncio.wrap_future(self._removing)  # removals run in order: the last one ends last
        # A settle asked for after the wait above (a rescan the stop did not cancel) may still be
        # queued on the disk thread: it runs after this, when the history may be closed, and leaves its
        # answers (campaign10: recorded on the closed history, they were published as fail-safe
        # denials no row holds).
        self._closed = True
        self._disk.shutdown(wait=False)

    async def _draining(self) -> None:
        await asyncio.sleep(0)  # every answer already runnable joins the first batch
        while self._queue:
            if self._past_grace():
                self._leave_unwaited()
                self._room.set()
                if not self._queue:
                    break
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            self._room.set()
            try:
                await self.on_disk(self._commit, batch)
            except Exception as exc:  # a bug must not strand the answers waiting on this batch
                log.exception("publishing a batch of %d failed", len(batch))
                for item in batch:
                    if item.written is None:
                        item.write_failed = item.write_failed or f"publishing failed ({what(exc)})"
            answered: list[tuple[BatchItem, Published]] = []
            results = [item.result() for item in batch]
            if self.on_batch is not None:
                try:
                    self.on_batch(list(zip([item.verdict.key for item in batch], results, strict=True)))
                except Exception:  # a bug must not strand the answers waiting on this batch
                    log.exception("reporting a batch of %d failed", len(batch))
            for item, published in zip(batch, results, strict=True):
                if self.on_published is not None:
                    self.on_published(item.verdict.key, published)
                if not item.done.done():
                    item.done.set_result(published)
                if published.written:
                    answered.append((item, published))
            if answered:
                self._removing = self._disk.submit(self._remove_requests, answered)

    def _past_grace(self) -> bool:
        """A stop's grace is over (`close`), or `close` has returned: answers no one waits on are left
        from now on."""
        return self._closed or (self._leave_after is not None and self.clock.monotonic() >= self._leave_after)

    def _leave_unwaited(self) -> None:
        """At a stop past its grace: the queued answers no one waits on, left (see `close`)."""
        unwaited = self._unwaited
        left = [item for item in self._queue if item.done is unwaited]
        if left:
            self._queue = [item for item in self._queue if item.done is not unwaited]
            _say_left(len(left))

    def _remove_requests(self, answered: Sequence[tuple[BatchItem, Published]]) -> None:
        gone = _remove_answered(answered, self.writer)
        self.fault("deleted")
        if self.on_removed is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing is tracked any more
                self._loop.call_soon_threadsafe(self.on_removed, gone)

    # -- on the disk thread: the checkpoints of one batch ---------------------------------------

    def settle(self, inbox: SessionInbox, verdicts: list[VerdictRecord]) -> SettledBatch:
        """An intake's answers decided at once (`core.serving.at_once`), on the disk thread: one batch
        through the same checkpoints, then the requests answered removed. No one waits on them; the
        event loop learns what became of each, and which requests are gone, from what this returns."""
        unwaited = self._unwaited
        assert unwaited is not None, "the loop made the unwaited future before asking for a trip"
        if self._past_grace():
            _say_left(len(verdicts))  # begun past a stop's grace: left for the next start (see `close`)
            return SettledBatch([], frozenset())
        batch = [BatchItem(inbox, verdict, unwaited) for verdict in verdicts]
        try:
            self._commit(batch)
        except Exception as exc:  # a bug must not lose the answers: each says it was not written
            log.exception("publishing a batch of %d failed", len(batch))
            for item in batch:
                if item.written is None:
                    item.write_failed = item.write_failed or f"publishing failed ({what(exc)})"
        results = [item.result() for item in batch]
        names = [one.verdict.key.name for one in results if one.written]
        gone: frozenset[str] = frozenset()
        if names:
            try:  # a request that stays holds its name by a record (`Pipeline.answered_at_once`)
                gone = frozenset(_remove_requests(inbox, names, self.writer))
                self.fault("deleted")
            except Exception:
                log.exception("removing %d answered requests failed", len(names))
        return SettledBatch(results, gone)

    def settle_soon(self, inbox: SessionInbox, verdicts: list[VerdictRecord]) -> asyncio.Future[SettledBatch]:
        """`settle` next on the disk thread (on the loop: after the disk work asked for before)."""
        self.unwaited()  # made here, on the loop, before the disk thread needs it
        done = self.submit(self.settle, inbox, verdicts)
        self._settling.add(done)
        done.add_done_callback(self._settling.discard)
        return done

    def unwaited(self) -> asyncio.Future[Published]:
        """The `done` of every answer no one waits on: one future, cancelled from the start (made on
        the loop, before a trip may need it)."""
        if self._unwaited is None:
            self._loop = asyncio.get_running_loop()
            self._unwaited = self._loop.create_future()
            self._unwaited.cancel()
        return self._unwaited

    def _commit(self, batch: Sequence[BatchItem]) -> None:
        """The checkpoints, in order, on the disk thread: every answer's file is written once the batch
        is recorded. (Writing a single ask's file ahead, on threads of their own beside the ledger's
        commit, was measured and removed: 8–16% slower on tmpfs and a fresh ext4, the same on the aged
        disk, now that a file whose verdict the history holds needs no flush of its own.)"""
        self.fault("arrived")
        together = len(batch) >= SYNCFS_FROM
        opened = self._open_folders(batch)
        try:
            self._record(batch)  # a verdict the ledger refused is replaced by its fail-safe denial
            self.fault("recorded")
            self._stage_all(opened, together)
            self._place_all(opened, together, self.fault)
        finally:
            self._close_folders(opened)
        failed = [item for item in batch if item.write_failed is not None and item.written is None]
        if failed:
            self._write_again(failed)
        # `WrittenMark(key, request_id, written)`, each made in C (the named tuple's `__new__` is a
        # Python function taking keywords: one per ask of a burst).
        marks = [
            _new_mark(WrittenMark, (i.verdict.key, i.verdict.parsed.request.id, bool(i.written), None))
            for i in batch
            if i.written is not None and i.history_failed is None
        ]
        ledger = self.ledger
        if self._unnoted:  # refused before: noted with these
            marks, self._unnoted = self._unnoted + marks, []
        if ledger is not None and marks:
            # Retried like the record: an unnoted row says a visible response was never written.
            error = self._attempts("noting the written responses", lambda: ledger.mark_written(marks))
            if error is not None:
                # The responses are visible: noted with the next batch's, or by a restart from the files.
                log.error("noting %d written responses in the history failed: %s", len(marks), error)
                self._unnoted = marks[-UNNOTED_KEPT:]
        self.fault("marked")

    def _record(self, batch: Sequence[BatchItem]) -> None:
        """One durable transaction for the batch; a refused batch is retried, then each verdict alone,
        and a verdict still refused is replaced by a fail-safe denial (published unrecorded)."""
        ledger = self.ledger
        if ledger is None:
            return
        verdicts = [item.verdict for item in batch]
        error = self._attempts("recording the verdicts", lambda: ledger.record_verdicts(verdicts))
        if error is None:
            return
        for item in batch:
            if len(batch) > 1:
                try:
                    ledger.record_verdicts([item.verdict])
                    continue
                except Exception as exc:
                    error = exc
            key = item.verdict.key
            log.error("session=%s request=%s: recording the verdict failed: %s", log_safe(key.session_id),
                      log_safe(display_name(key.name)), error)
            item.history_failed = f"the history could not record the verdict ({what(error)})"
            reason = f"{item.history_failed}; denied for safety"
            response = gate_denial(item.inbox.session_id, self.clock, reason)
            item.verdict = item.verdict._replace(response=response, body=encode_response(response),
                                                 outcome="fail-safe")

    # -- the response files, on descriptors -----------------------------------------------------

    def _write(self, batch: Sequence[BatchItem]) -> None:
        """Stage, make durable and place responses one after the other (a retry)."""
        opened = self._open_folders(batch)
        try:
            self._stage_all(opened, together=False)
            self._place_all(opened, together=False, fault=no_fault)
        finally:
            self._close_folders(opened)

    def _open_folders(self, batch: Sequence[BatchItem]) -> list[tuple[int, list[BatchItem]]]:
        """Each session's `responses/` once (created from the root down, never through a link)."""
        folders: dict[str, list[BatchItem]] = {}
        for item in batch:
            folders.setdefault(item.inbox.folder_name, []).append(item)
        opened: list[tuple[int, list[BatchItem]]] = []
        for items in folders.values():
            try:
                opened.append((open_folder(items[0].inbox, "responses", create=True), items))
            except Exception as exc:
                fail(items, exc)
        return opened

    def _stage_all(self, opened: Opened, together: bool) -> None:
        """Each answer's bytes into a file not visible yet: a batch of `SYNCFS_FROM` or more in one loop
        of the writer (`DiskWriter.stage_batch`, made durable together by `sync_all`), what that left
        and a smaller batch one file at a time (`stage`, synced at once where it must be flushed)."""
        suffix = temp_suffix()  # the temp names of one batch end alike
        stage = self.writer.stage
        each = not together
        # A file is flushed itself (and its folder once placed) only where its verdict is not durable in
        # the history first (a restart publishes it from there): no history, or one refusing this verdict.
        unrecorded = self.ledger is None
        for fd, items in opened:
            made = self.writer.stage_batch(fd, [item.verdict.body for item in items]) if together else ()
            for index, item in enumerate(items):
                if made and (staged := made[index]) is not None:
                    item.temp, item.synced = staged, False
                    continue
                verdict = item.verdict
                temp = temp_name(f"{verdict.request_id}.json", suffix)
                sync = each and (unrecorded or item.history_failed is not None)
                try:
                    item.temp = stage(fd, temp, verdict.body, sync)
                except Exception as exc:
                    with contextlib.suppress(OSError, ValueError):
                        remove(fd, temp)
                    fail([item], exc)
                    continue
                item.synced = sync

    def _place_all(
        self, opened: Opened, together: bool, fault: FaultHook
    ) -> None:
        fault("staged")
        unrecorded = self.ledger is None  # a response flushed itself: see `_stage_all`
        for fd, items in opened:
            unflushed = [item for item in items if item.temp is not None and not item.synced
                         and (unrecorded or item.history_failed is not None)]
            if together and unflushed:
                self._sync(fd, unflushed)
            else:
                self._sync_each(fd, unflushed)
        fault("durable")
        for fd, items in opened:
            self._drop_withdrawn(fd, items)
        waitings = [[item for item in items if item.temp is not None] for _, items in opened]
        half = sum(map(len, waitings)) // 2
        index = 0
        for (fd, _), waiting in zip(opened, waitings, strict=True):
            at, flushed = half - index if half else -1, False  # "half-linked" before the answer at `at`
            for part in [waiting[:at], None, waiting[at:]] if 0 <= at < len(waiting) else [waiting]:
                if part is None:
                    fault("half-linked")
                elif self._place(fd, part, unrecorded):
                    flushed = True
            index += len(waiting)
            if flushed:
                try:
                    self.writer.fsync_dir(fd)
                except OSError as exc:
                    log.error("fsync of a responses folder failed after publishing: %s", exc)
        fault("linked")

    def _place(self, fd: int, items: list[BatchItem], unrecorded: bool) -> bool:
        """Link these staged answers as their responses (`DiskWriter.place_batch`: never replacing);
        whether one placed must have its folder flushed (`_stage_all`)."""
        targets = [f"{item.verdict.request_id}.json" for item in items]
        flushed = False
        for item, target, written in zip(items, targets, self.writer.place_batch(
                fd, [item.temp for item in items if item.temp is not None], targets), strict=True):
            if isinstance(written, Exception):
                fail([item], written)
                continue
            item.write_failed = None
            if written:
                item.written, item.temp = True, None  # placed: nothing staged is left
            elif read_small(fd, target, len(item.verdict.body)) == item.verdict.body:
                # Already there with exactly this verdict's bytes: an earlier attempt of this node placed
                # it (its report failed). Verified byte for byte, never assumed: other content is forged.
                self.drop_temp(fd, item)
                item.written = True
            else:
                item.written = False  # another's answer is there: never replaced
                continue
            if unrecorded or item.history_failed is not None:
                flushed = True
        return flushed

    def _drop_withdrawn(self, fd: int, items: Sequence[BatchItem]) -> None:
        """Just before placing: an answer whose request file is gone is not placed. Its child gave up
        (at its deadline the reference's child deletes its request, and reads no response after), so
        the answer would lie where nobody reads it, and its row would say it was written. The protocol
        has no lock: a child giving up between this look and the link is not seen, but the window is
        this look, not the answer's whole wait at the disk (`_withdrawn`)."""
        waiting = [item for item in items if item.temp is not None]
        if not waiting:
            return
        for item in _withdrawn(waiting):
            item.withdrawn = True
            self.drop_temp(fd, item)

    def _sync(self, fd: int, items: list[BatchItem]) -> None:
        try:
            if self.writer.sync_all(fd):
                return
        except OSError as exc:
            log.warning("syncfs failed (%s); fsyncing each response instead", exc)
        self._sync_each(fd, items)

    def _sync_each(self, fd: int, items: list[BatchItem]) -> None:
        for item in items:
            if item.temp is None:
                continue
            try:
                self.writer.sync_file(fd, item.temp)
            except OSError as exc:
                fail([item], exc)
                self.drop_temp(fd, item)

    def _write_again(self, items: Sequence[BatchItem]) -> None:
        """Responses whose batch write failed: retried with backoff (disk full, EIO), each one alone,
        all of them after one wait on the clock per step: the disk thread blocks (the loop goes on; the
        next intake waits) at most the sum of the delays per batch, however many failed."""
        attempts = len(self.retry_delays) + 1
        for attempt, delay in enumerate(self.retry_delays, start=1):
            log.warning("writing %d response(s) failed (attempt %d of %d): %s; retrying",
                        len(items), attempt, attempts, items[0].write_failed)
            self.clock.sleep(delay)
            for item in items:
                item.write_failed = None
                self._write([item])
            items = [item for item in items if item.write_failed is not None]
            if not items:
                return

    def _attempts(self, step: str, action: Callable[[], object]) -> Exception | None:
        """Run `action`, retrying transient failures with backoff on the clock; the last failure, or None."""
        delays = (0.0, *self.retry_delays)
        for attempt, delay in enumerate(delays, start=1):
            if delay:
                self.clock.sleep(delay)
            try:
                action()
                return None
            except TRANSIENT as exc:
                if attempt == len(delays):
                    return exc
                log.warning("%s failed (attempt %d of %d): %s; retrying", step, attempt, len(delays), exc)
            except Exception as exc:
                return exc
        raise AssertionError("unreachable")

    def _close_folders(self, opened: Opened) -> None:
        """Drop what was staged and not placed, and let go of the folders."""
        for fd, items in opened:
            for item in items:
                if item.temp is not None:
                    self.drop_temp(fd, item)
            os.close(fd)

    def drop_temp(self, fd: int, item: BatchItem) -> None:
        if item.temp is not None:
            self.writer.discard(fd, item.temp)
            item.temp = None


_new_mark = tuple.__new__


def fail(items: Sequence[BatchItem], exc: BaseException) -> None:
    for item in items:
        item.write_failed = str(exc) if isinstance(exc, OSError) else what(exc)
        item.written = None


def what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def open_folder(inbox: SessionInbox, sub: str, create: bool = False) -> int:
    """A descriptor for a folder of the session, opened from the root down, never through a link."""
    return inbox.tree.open(("sessions", inbox.folder_name, sub), create)


def _withdrawn(items: Sequence[BatchItem]) -> Sequence[BatchItem]:
    """Which of these answers (all of one session) have no request file in `requests/` now: all of them
    when the folder is gone (the child that gave up removed it, emptied), none when it cannot be read.
    A look per answer that builds nothing (`faccessat`, never following a link), and an `lstat` for a
    name it does not find, so that only an absence (not an error) withdraws an answer. (A listing per
    batch was dearer in a burst: the folder holds every ask not yet removed, and listing 5,000 names
    cost ~4 ms against ~0.25 ms for a batch's 256 looks; tmpfs, this machine.)"""
    inbox = items[0].inbox
    try:
        fd = inbox.tree.open(("sessions", inbox.folder_name, "requests"))
    except FileNotFoundError:
        return items
    except OSError:
        return ()
    access, present = os.access, os.F_OK
    withdrawn: list[BatchItem] = []
    try:
        for item in items:
            name = item.verdict.key.name
            if not access(check_name(name), present, dir_fd=fd, follow_symlinks=False) and (
                    lstat_or_none(fd, name) is None):
                withdrawn.append(item)
    except (OSError, ValueError):
        return ()
    finally:
        os.close(fd)
    return withdrawn


def _remove_requests(inbox: SessionInbox, names: Sequence[str], writer: DiskWriter) -> list[str]:
    """Delete answered requests of one session through one folder descriptor; the names gone, a
    child's removal included. A plain loop: it runs once per ask of a burst."""
    try:
        fd = inbox.tree.open(("sessions", inbox.folder_name, "requests"))
    except FileNotFoundError:
        return list(names)
    except OSError:
        return []
    try:
        gone, failed = writer.remove_requests(fd, names)  # a child's removal counts as gone
    finally:
        os.close(fd)
    for name, exc in failed:
        log.warning("deleting answered request %s failed: %s", log_safe(display_name(name)), exc)
    return gone


def _remove_answered(
    answered: Sequence[tuple[BatchItem, Published]], writer: DiskWriter
) -> list[tuple[AskKey, Published]]:
    """Delete answered requests (one folder descriptor per session, `_remove_requests`); those gone, a
    child's removal included."""
    folders: dict[str, list[tuple[BatchItem, Published]]] = {}
    for pair in answered:
        folders.setdefault(pair[0].inbox.folder_name, []).append(pair)
    gone: list[tuple[AskKey, Published]] = []
    for group in folders.values():
        names = [item.verdict.key.name for item, _ in group]
        removed = set(_remove_requests(group[0][0].inbox, names, writer))
        gone += [(item.verdict.key, one) for item, one in group if item.verdict.key.name in removed]
    return gone


def _say_left(count: int) -> None:
    log.warning("stopping: %d answers decided here are left unwritten; their requests stay for the next "
                "start", count)
