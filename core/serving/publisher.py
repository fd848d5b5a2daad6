"""The publisher, the last stage of serving: history record → response file, a batch at a time.

Every answer ready at the same moment joins one batch (at most `MAX_BATCH`) that goes through the
stages of `BATCH_STAGES` in order, each a named fault point (`fault=`, the seam crash tests use;
`docs/serving-speed.md` says what is true after each): `recorded`, every verdict in ONE fsynced
transaction (recorded before visible; a verdict the ledger refuses is replaced by a fail-safe denial
that says why, so nothing is approved without its record); `staged` and `durable`, each body in a
temp beside its target, made durable by one `syncfs` (an `fsync` each below `SYNCFS_FROM`);
`half-linked` and `linked`, each temp renamed to `responses/<id>.json` without replacing
(`renameat2(RENAME_NOREPLACE)`, else `link()`: nothing is answered twice), each folder fsynced;
`marked`, the ledger notes what was written; `deleted`, the answered requests removed on a worker
of their own. A restart reconciles a stop between any two stages (`core.serving.reconcile`).

The records are `core.serving.verdicts`; the file stages (on descriptors, through the `DiskWriter` seam,
never through a link) are `core.serving.response_files`; their order is `BatchStages._commit`
(`core.serving.batch_stages`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from core.clock import SYSTEM_CLOCK, Clock
from core.disk.writer import DiskWriter
from core.forwarding.inbox import SessionInbox
from core.seams import RETRY_DELAYS_S, FaultHook, no_fault
from core.serving.answered_requests import remove_answered
from core.serving.asks import AskKey
from core.serving.batch_stages import BatchStages
from core.serving.response_files import SYNCFS_FROM, what
from core.serving.verdicts import (
    BatchItem,
    Ledger,
    Published,
    RecordedVerdict,
    VerdictRecord,
    WrittenMark,
    gate_denial,
)

__all__ = [  # what other modules take from here (the records are `core.serving.verdicts`'s)
    "BATCH_STAGES", "MAX_BATCH", "SYNCFS_FROM", "Ledger", "Published", "Publisher",
    "RecordedVerdict", "VerdictRecord", "WrittenMark", "gate_denial",
]

log = logging.getLogger("pi_authorizer.publish")

MAX_BATCH = 1024
"""Answers per batch: bounds one batch's memory and the wait of its first answer."""
"""Backoff between attempts of a failed record or response write (disk full, EIO): the first
attempt, then one after each delay. A write that still fails is retried at the next rescan."""
STAGERS = 2
"""Threads writing temps ahead: an anonymous file is created without locking its folder, so two
creations (each a search for a free inode, slow on a busy filesystem) run side by side."""
BATCH_STAGES = ("arrived", "recorded", "staged", "durable", "half-linked", "linked", "marked", "deleted")
"""Fault points in order; at `arrived` the batch's asks are judged and reported, nothing recorded."""
Settled = Callable[[AskKey, "Published"], None]
"""Told, on the event loop, what became of an answer, before anyone waiting on it resumes."""
Removed = Callable[[Sequence[tuple[AskKey, "Published"]]], None]
"""Told, on the event loop, which answered requests are gone from their inboxes (and by which answer)."""


class Publisher(BatchStages):
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
        self._queue: list[BatchItem] = []
        self._room = asyncio.Event()
        self._drain: asyncio.Task[None] | None = None
        self._remover = ThreadPoolExecutor(1, thread_name_prefix="pi-authorizer-remove")
        self._removing: concurrent.futures.Future[None] | None = None
        self._stager = ThreadPoolExecutor(STAGERS, thread_name_prefix="pi-authorizer-stage")
        self._unstaged: list[BatchItem] = []

    async def publish(self, inbox: SessionInbox, verdict: VerdictRecord) -> Published:
        return await asyncio.shield(self.enqueue(inbox, verdict))

    def enqueue(self, inbox: SessionInbox, verdict: VerdictRecord) -> asyncio.Future[Published]:
        """`publish` without waiting (on the loop): the future is set when the answer's batch is done."""
        self._loop = asyncio.get_running_loop()
        done: asyncio.Future[Published] = self._loop.create_future()
        item = BatchItem(inbox, verdict, done)
        self._queue.append(item)
        if not self._unstaged:
            self._loop.call_soon(self._stage_ahead)
        self._unstaged.append(item)
        if self._drain is None or self._drain.done():
            self._drain = asyncio.ensure_future(self._draining())
        return done

    def _stage_ahead(self) -> None:
        """Fewer than `SYNCFS_FROM` answers queued in one loop turn get their temps written now, on
        the stager, beside the ledger's commit (a single ask waits for neither in turn). More, with a
        ledger, are a burst: each is written into its own request file once recorded
        (`_reuse_or_stage`), as creating thousands of files is the slow part of a burst. Called on
        the loop (and before a batch is taken: every item staged ahead has its job)."""
        items, self._unstaged = self._unstaged, []
        if items and (self.ledger is None or len(items) < SYNCFS_FROM):
            job = self._stager.submit(self._stage_items, items)
            for item in items:
                item.staging = job

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
            self._stage_ahead()
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            self._room.set()
            try:
                await asyncio.to_thread(self._commit, batch)
            except Exception as exc:  # a bug must not strand the answers waiting on this batch
                log.exception("publishing a batch of %d failed", len(batch))
                for item in batch:
                    if item.written is None:
                        item.write_failed = item.write_failed or f"publishing failed ({what(exc)})"
            answered: list[tuple[BatchItem, Published]] = []
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

    def _remove_requests(self, answered: Sequence[tuple[BatchItem, Published]]) -> None:
        gone = remove_answered(answered)
        self.fault("deleted")
        if self.on_removed is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing is tracked any more
                self._loop.call_soon_threadsafe(self.on_removed, gone)
