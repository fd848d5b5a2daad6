"""The publisher, the last stage of serving: history record → response file, a batch at a time.

A burst of asks used to pay one fsynced SQLite commit and two fsyncs per answer. Here every answer
ready at the same moment joins one batch (at most `MAX_BATCH`), and the batch goes through these
stages in order, each one a named fault point (`fault=`, the explicit seam crash tests use):

- `recorded`: every verdict is in the ledger, in ONE fsynced transaction (recorded before visible);
  a verdict the ledger refuses (after the retries) is replaced by a fail-safe denial that says why,
  so nothing is ever approved without its record;
- `staged`: each body is in a new temp file beside its target (`<id>.json.<pid>.<ms>.tmp`);
- `durable`: the temps are on disk: one `syncfs` for a batch of `SYNCFS_FROM` or more, an `fsync`
  per file below that (a single ask stays fast);
- `half-linked`, `linked`: each temp is renamed to `responses/<id>.json` without replacing
  (`renameat2(RENAME_NOREPLACE)`, else `link()`): nothing is ever answered twice; then each
  responses folder is fsynced once;
- `marked`: the ledger notes, in one transaction, which responses were written;
- `deleted`: the answered request files are removed, on a worker of their own (an unlink of a synced
  file can wait on the filesystem journal; the next batch must not wait behind it).

A restart reconciles a stop between any two stages (see `core.serving.reconcile`): a recorded
verdict without its response is published with the recorded bytes; a response without its note is
noted; a request whose response exists is removed. Every file operation goes through the
`DiskWriter` seam, relative to folder descriptors from `core.tree` (no link is ever followed).

Size: over 250 lines because the stages share one item record and must stay in one order in one
place (reading them side by side is how "recorded before visible" is checked).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

from core.asks import AskKey
from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.faults import FaultHook, no_fault
from core.files import DiskWriter, remove, temp_name
from core.inbox import SessionInbox, display_name
from core.logline import log_safe
from core.wire.decisions import GateErrorDecision
from core.wire.request import ParsedRequest
from core.wire.response import ForwardedResponse, deny, encode_response

log = logging.getLogger("pi_authorizer.publish")

MAX_BATCH = 1024
"""Answers per batch: bounds one batch's memory and the wait of its first answer."""
SYNCFS_FROM = 4
"""From this many response files in a batch, one `syncfs` beats an `fsync` per file."""
RETRY_DELAYS_S = (0.05, 0.25, 1.0)
"""Backoff between attempts of a failed record or response write (disk full, EIO): the first
attempt, then one after each delay. A write that still fails is retried at the next rescan."""

BATCH_STAGES = ("arrived", "recorded", "staged", "durable", "half-linked", "linked", "marked", "deleted")
"""Fault points in order; at `arrived` the batch's asks are judged and reported, nothing recorded."""
Settled = Callable[[AskKey, "Published"], None]
"""Told, on the event loop, what became of an answer, before anyone waiting on it resumes."""
Removed = Callable[[Sequence[tuple[AskKey, "Published"]]], None]
"""Told, on the event loop, which answered requests are gone from their inboxes (and by which answer)."""
TRANSIENT = (OSError, sqlite3.OperationalError)


@dataclass(frozen=True)
class RecordedVerdict:
    """A verdict the ledger holds for a request: its exact response bytes, and whether it is visible."""

    body: bytes
    written: bool


@dataclass(frozen=True)
class VerdictRecord:
    """One verdict to record and publish: the ask, the response, its exact bytes, who decided."""

    key: AskKey
    parsed: ParsedRequest
    response: ForwardedResponse
    body: bytes
    outcome: str

    @property
    def request_id(self) -> str:
        return self.parsed.request.id


@dataclass(frozen=True)
class WrittenMark:
    """The response for `request_id` was linked into place (`written`) or found already there."""

    key: AskKey
    request_id: str
    written: bool


class Ledger(Protocol):
    """Durable history: verdicts are recorded before their response files become visible."""

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        """Durable on return, all or nothing."""
        ...

    def mark_written(self, marks: Sequence[WrittenMark]) -> None: ...

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, RecordedVerdict]:
        """The verdicts recorded for these requests of a session, by request id."""
        ...


@dataclass(frozen=True)
class Published:
    """What became of one answer. `verdict` is what was published (a fail-safe denial when the
    ledger refused the original: `history_failed` says why); `write_failed` means nothing is visible."""

    verdict: VerdictRecord
    written: bool = False
    history_failed: str | None = None
    write_failed: str | None = None


def gate_denial(responder: str, clock: Clock, reason: str) -> ForwardedResponse:
    """A denial no person made, with the reason the child passes on to its agent."""
    return deny(
        responder=responder,
        at_ms=wall_ms(clock),
        decided_by=GateErrorDecision(reason=reason),
        reason=f"pi-authorizer could not serve this request: {reason}",
    )


@dataclass
class _Item:
    inbox: SessionInbox
    verdict: VerdictRecord
    done: asyncio.Future[Published]
    history_failed: str | None = None
    write_failed: str | None = None
    temp: str | None = None
    written: bool | None = None

    def result(self) -> Published:
        written = bool(self.written) and self.write_failed is None
        return Published(self.verdict, written, self.history_failed, self.write_failed)


class Publisher:
    """Collects the answers ready at one moment and commits them together.

    `publish()` queues an answer and waits for its batch; one drain task per burst takes whatever is
    queued (up to `MAX_BATCH`), commits it on a worker thread, settles every answer of the batch and
    goes on while answers are queued. Cancelling a caller never strands the others.
    """

    def __init__(
        self,
        ledger: Ledger | None,
        writer: DiskWriter,
        clock: Clock = SYSTEM_CLOCK,
        retry_delays: Sequence[float] = RETRY_DELAYS_S,
        fault: FaultHook = no_fault,
        max_batch: int = MAX_BATCH,
        on_published: Settled | None = None,
        on_removed: Removed | None = None,
    ) -> None:
        self.ledger = ledger
        self.writer = writer
        self.clock = clock
        self.retry_delays = tuple(retry_delays)
        self.fault = fault
        self.max_batch = max_batch
        self.on_published = on_published
        self.on_removed = on_removed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: list[_Item] = []
        self._room = asyncio.Event()
        self._drain: asyncio.Task[None] | None = None
        self._remover = ThreadPoolExecutor(1, thread_name_prefix="pi-authorizer-remove")
        self._removing: concurrent.futures.Future[None] | None = None
        self._stager = ThreadPoolExecutor(1, thread_name_prefix="pi-authorizer-stage")

    async def publish(self, inbox: SessionInbox, verdict: VerdictRecord) -> Published:
        self._loop = asyncio.get_running_loop()
        done: asyncio.Future[Published] = self._loop.create_future()
        self._queue.append(_Item(inbox, verdict, done))
        if self._drain is None or self._drain.done():
            self._drain = asyncio.ensure_future(self._draining())
        return await asyncio.shield(done)

    async def room(self) -> None:
        """Wait while a whole batch is already queued behind the one being committed (backpressure)."""
        while len(self._queue) >= self.max_batch:
            self._room.clear()
            await self._room.wait()

    async def close(self) -> None:
        """Finish the batches queued and the removals asked for."""
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await self._drain
        if self._removing is not None and not self._removing.done():
            await asyncio.wrap_future(self._removing)  # removals run in order: the last one ends last
        self._remover.shutdown(wait=False)
        self._stager.shutdown(wait=False)

    async def _draining(self) -> None:
        await asyncio.sleep(0)  # every answer already runnable joins the first batch
        while self._queue:
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            self._room.set()
            try:
                await asyncio.to_thread(self._commit, batch)
            except Exception as exc:  # a bug must not strand the answers waiting on this batch
                log.exception("publishing a batch of %d failed", len(batch))
                for item in batch:
                    if item.written is None:
                        item.write_failed = item.write_failed or f"publishing failed ({_what(exc)})"
            answered: list[tuple[_Item, Published]] = []
            for item in batch:
                published = item.result()
                if self.on_published is not None:
                    self.on_published(item.verdict.key, published)
                if not item.done.done():
                    item.done.set_result(published)
                if published.written:
                    answered.append((item, published))
            if answered:
                self._removing = self._remover.submit(self._remove_requests, answered)

    # -- the stages, on a worker thread -----------------------------------------------------------

    def _commit(self, batch: Sequence[_Item]) -> None:
        """The stages, in order. The bodies are staged (written, not visible) while the ledger
        records, on a second thread: the two wait on the disk side by side, never in turn."""
        self.fault("arrived")
        together = len(batch) >= SYNCFS_FROM
        opened = self._open_folders(batch)
        try:
            staging = self._stager.submit(self._stage_all, opened, together)
            try:
                self._record(batch)
            finally:
                staging.result()
            self.fault("recorded")
            for fd, items in opened:
                for item in items:
                    if item.history_failed is not None and item.temp is not None:
                        # Staged with the verdict the ledger refused: never placed; the denial is.
                        _drop_temp(fd, item)
                        self._stage(fd, item, sync=not together)
            self._place_all(opened, together, self.fault)
        finally:
            _close_folders(opened)
        for item in batch:
            if item.write_failed is not None and item.written is None:
                self._write_alone(item)
        marks = [
            WrittenMark(i.verdict.key, i.verdict.request_id, bool(i.written))
            for i in batch
            if i.written is not None and i.history_failed is None
        ]
        if self.ledger is not None and marks:
            try:
                self.ledger.mark_written(marks)
            except Exception as exc:
                # The responses are visible; a restart notes them from the files themselves.
                log.error("noting %d written responses in the history failed: %s", len(marks), exc)
        self.fault("marked")

    def _record(self, batch: Sequence[_Item]) -> None:
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
            item.history_failed = f"the history could not record the verdict ({_what(error)})"
            reason = f"{item.history_failed}; denied for safety"
            response = gate_denial(item.inbox.session_id, self.clock, reason)
            item.verdict = replace(item.verdict, response=response, body=encode_response(response),
                                   outcome="fail-safe")

    def _attempts(self, step: str, action: Callable[[], object]) -> Exception | None:
        """Run `action`, retrying transient failures with backoff; the last failure, or None."""
        delays = (0.0, *self.retry_delays)
        for attempt, delay in enumerate(delays, start=1):
            if delay:
                time.sleep(delay)
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

    def _write(self, batch: Sequence[_Item]) -> None:
        """Stage, make durable and place responses one after the other (a retry)."""
        opened = self._open_folders(batch)
        try:
            self._stage_all(opened, together=False)
            self._place_all(opened, together=False, fault=no_fault)
        finally:
            _close_folders(opened)

    def _open_folders(self, batch: Sequence[_Item]) -> list[tuple[int, list[_Item]]]:
        """Each session's `responses/` once (created from the root down, never through a link)."""
        folders: dict[str, list[_Item]] = {}
        for item in batch:
            folders.setdefault(item.inbox.folder_name, []).append(item)
        opened: list[tuple[int, list[_Item]]] = []
        for items in folders.values():
            try:
                opened.append((_open(items[0].inbox, "responses", create=True), items))
            except Exception as exc:
                _fail(items, exc)
        return opened

    def _stage_all(self, opened: Sequence[tuple[int, list[_Item]]], together: bool) -> None:
        for fd, items in opened:
            for item in items:
                self._stage(fd, item, sync=not together)

    def _place_all(self, opened: Sequence[tuple[int, list[_Item]]], together: bool, fault: FaultHook) -> None:
        fault("staged")
        if together:
            for fd, items in opened:
                self._sync(fd, items)
        fault("durable")
        staged = [(fd, item) for fd, items in opened for item in items if item.temp is not None]
        half = len(staged) // 2
        placed: set[int] = set()
        for index, (fd, item) in enumerate(staged):
            if index == half and index > 0:
                fault("half-linked")
            if self._place(fd, item):
                placed.add(fd)
        for fd in placed:
            try:
                self.writer.fsync_dir(fd)
            except OSError as exc:
                log.error("fsync of a responses folder failed after publishing: %s", exc)
        fault("linked")

    def _stage(self, fd: int, item: _Item, sync: bool) -> None:
        temp = temp_name(f"{item.verdict.request_id}.json")
        try:
            if sync:
                self.writer.write_new(fd, temp, item.verdict.body)
            else:
                self.writer.write_unsynced(fd, temp, item.verdict.body)
        except Exception as exc:
            with contextlib.suppress(OSError, ValueError):
                remove(fd, temp)
            _fail([item], exc)
            return
        item.temp = temp

    def _sync(self, fd: int, items: list[_Item]) -> None:
        try:
            if self.writer.sync_all(fd):
                return
        except OSError as exc:
            log.warning("syncfs failed (%s); fsyncing each response instead", exc)
        for item in items:
            if item.temp is None:
                continue
            try:
                _fsync_file(fd, item.temp)
            except OSError as exc:
                _fail([item], exc)
                with contextlib.suppress(OSError):
                    remove(fd, item.temp)
                item.temp = None

    def _place(self, fd: int, item: _Item) -> bool:
        assert item.temp is not None
        try:
            item.written = self.writer.place(fd, item.temp, f"{item.verdict.request_id}.json")
        except Exception as exc:
            _fail([item], exc)
            return False
        item.write_failed = None
        if item.written:
            with contextlib.suppress(OSError):
                remove(fd, item.temp)  # the `link()` fallback leaves the temp name behind
            item.temp = None
        return bool(item.written)

    def _write_alone(self, item: _Item) -> None:
        """A response whose batch write failed: retried alone with backoff (disk full, EIO)."""
        attempts = len(self.retry_delays) + 1
        for attempt, delay in enumerate(self.retry_delays, start=1):
            log.warning("writing the response failed (attempt %d of %d): %s; retrying",
                        attempt, attempts, item.write_failed)
            time.sleep(delay)
            item.write_failed = None
            self._write([item])
            if item.write_failed is None:
                return

    def _remove_requests(self, answered: Sequence[tuple[_Item, Published]]) -> None:
        """Delete answered requests (one folder descriptor per session); a child's removal is fine."""
        folders: dict[str, list[tuple[_Item, Published]]] = {}
        for pair in answered:
            folders.setdefault(pair[0].inbox.folder_name, []).append(pair)
        gone: list[tuple[AskKey, Published]] = []
        for group in folders.values():
            try:
                fd = _open(group[0][0].inbox, "requests")
            except FileNotFoundError:
                gone += [(item.verdict.key, published) for item, published in group]
                continue
            except OSError:
                continue
            try:
                for item, published in group:
                    try:
                        remove(fd, item.verdict.key.name)
                    except OSError as exc:
                        log.warning("deleting answered request %s failed: %s",
                                    log_safe(display_name(item.verdict.key.name)), exc)
                        continue
                    gone.append((item.verdict.key, published))
            finally:
                os.close(fd)
        self.fault("deleted")
        if self.on_removed is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing is tracked any more
                self._loop.call_soon_threadsafe(self.on_removed, gone)


def _close_folders(opened: Sequence[tuple[int, list[_Item]]]) -> None:
    """Remove what was staged and not placed, and let go of the folders."""
    for fd, items in opened:
        for item in items:
            _drop_temp(fd, item)
        os.close(fd)


def _drop_temp(fd: int, item: _Item) -> None:
    if item.temp is not None:
        with contextlib.suppress(OSError):
            remove(fd, item.temp)
        item.temp = None


def _fail(items: Sequence[_Item], exc: BaseException) -> None:
    for item in items:
        item.write_failed = str(exc) if isinstance(exc, OSError) else _what(exc)
        item.written = None


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _fsync_file(dir_fd: int, name: str) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open(inbox: SessionInbox, sub: str, create: bool = False) -> int:
    """A descriptor for a folder of the session, opened from the root down, never through a link."""
    return inbox.tree.open(("sessions", inbox.folder_name, sub), create)
