"""The history file's write side: one connection under one lock, its transactions, the queue of what
is observed but not written yet, and retention. A transaction hands its caller the asks table
(`core.history.table`, where every statement is); `core.history.store.HistoryStore` writes the
ledger and the observer's facts through it.

Durability: every transaction commits with `synchronous=NORMAL` (it survives a killed process;
losing it to a power cut only loses display data) except a `durable` one, which commits with
`synchronous=FULL` (the ledger's verdicts, see `core.history.store`). The arrivals of a burst are
written together: queued as they are observed; the verdict transaction of a batch takes the
arrivals of its own asks and writes each with its verdict as one row; any other transaction and any
read write what is queued; a worker writes the arrivals that waited `ARRIVALS_WAIT_S` (an ask that
went to a person), and only those: in a burst the younger ones are taken by their batches, and so are
those whose verdicts the publisher already holds (`expect`), however long a burst keeps them queued
(measured: 45% of a 10,000-ask burst's arrivals were written alone, then updated with their verdict).

The queue also holds the fail-safe answers whose verdict the ledger refused (the store's `observe`
queues them like arrivals): written, each closes its ask's row as `fail-safe`. A failed transaction
keeps the queue for the next one; what is still queued when the writer closes is spooled beside the
file (`core.history.spool`) and queued first by the next open.

Size: the queue, its delayed worker and the transactions that drain it are one state under one
lock (`transaction` takes the queue); split apart, each half would reach into the other's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from core import platform
from core.disk.tree import FILE_MODE, Anchor
from core.history import spool
from core.history.queries import HistoryReader
from core.history.schema import migrate
from core.history.table import AsksTable
from core.seams import PRODUCTION, Seams
from core.serving.verdicts import VerdictRow
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.response import encode_response

log = logging.getLogger("pi_authorizer.history")

#: The page size of a new history file. A burst's rows (~1 KB each) are written twice, their verdicts
#: and then their marks, each time page by page into the WAL (a frame and two `pwrite`s per page) and
#: copied page by page at a checkpoint: twice SQLite's 4 KiB, half the pages (`record_verdicts` and
#: `mark_written` together 17.3 -> 16.2 µs per ask, the race's kind of ids, load 2.6-2.9).
PAGE_SIZE = 8192
#: How long a queued arrival waits for its verdict's transaction, which writes both as one row, before
#: a worker writes it alone (an ask that went to a person). A read of the history writes it at once.
ARRIVALS_WAIT_S = 0.5
#: After a transaction that wrote the queue was refused (a full disk), reads answer from what is stored
#: for this long without trying to write the queue first: on a full disk each page of the review
#: screen rewrote the whole queue (thousands of rows), was refused, and held a batch's record meanwhile.
READ_AFTER_REFUSAL_S = 1.0


@dataclass(frozen=True)
class Retention:
    """How long rows are kept. `None` disables a limit; pruning runs every `every` new rows."""

    max_age_s: float | None = 180 * 86400
    max_rows: int | None = 200_000
    every: int = 500


class Queued:
    """What is observed but not written yet, in the order observed. A verdict batch takes its own
    arrivals by key (`take_claims`), in steps of the batch's size however deep the queue is: a burst
    queues thousands of arrivals and each batch takes a few hundred (filtering the whole queue per
    batch cost the burst's asks time quadratic in its size). A note on one request takes that
    request's events alone (`take_keys`), found the same way."""

    def __init__(self, events: Iterable[ServeEvent] = ()) -> None:
        self._events: dict[int, ServeEvent] = {}
        self._arrivals: dict[AskKey, int | list[int]] = {}  # where each key's queued arrivals are
        self._others: dict[AskKey, int | list[int]] = {}  # and its other events (fail-safe closes)
        self._next = 0
        self._refill(events)

    def _refill(self, events: Iterable[ServeEvent]) -> None:
        self._events.clear()
        self._arrivals.clear()
        self._others.clear()
        for event in events:
            self.append(event)

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[ServeEvent]:
        return iter(self._events.values())

    def append(self, event: ServeEvent) -> None:
        index, self._next = self._next, self._next + 1
        self._events[index] = event
        where = self._arrivals if event.kind == "arrived" else self._others
        earlier = where.get(event.key)
        if earlier is None:
            where[event.key] = index  # the usual case: no list made
        elif isinstance(earlier, int):
            where[event.key] = [earlier, index]
        else:
            earlier.append(index)

    def take_claims(self, keys: Collection[AskKey]) -> tuple[list[ServeEvent], list[ServeEvent]]:
        """For a verdict batch: the lone queued arrival of each of these keys, to be written with its
        verdict as one row; and, in the order observed, every queued event of a key that has more
        (two requests under one name, or a fail-safe close queued for an earlier one), to be written
        first as they are. No longer queued. (Claiming the first of two arrivals dropped the second,
        and gave the verdict the other request's id.)"""
        if not self._arrivals:
            return [], []  # a burst answered in its intakes' trips queues none: no look per key
        claimed: list[int] = []
        first: list[int] = []
        for key in keys:
            found = self._arrivals.get(key)
            if found is None:
                continue
            if isinstance(found, int) and key not in self._others:
                del self._arrivals[key]
                claimed.append(found)
            else:
                first += _indexes(self._arrivals, (key,)) + _indexes(self._others, (key,))
        return self._pop(claimed), self._pop(first)

    def closes(self) -> list[ServeEvent]:
        """The queued fail-safe closes, in the order observed; none looked at when nothing but arrivals
        is queued (the usual case)."""
        if not self._others:
            return []
        return [event for event in self._events.values() if event.kind == "answered"]

    def take_keys(self, keys: Collection[AskKey]) -> list[ServeEvent]:
        """Every queued event of these keys (in the order observed), no longer queued."""
        return self._pop(_indexes(self._arrivals, keys) + _indexes(self._others, keys))

    def _pop(self, at: list[int]) -> list[ServeEvent]:
        return [self._events.pop(index) for index in sorted(at)]

    def take(self, due: Callable[[ServeEvent], bool] | None = None) -> list[ServeEvent]:
        """Every queued event (or the `due` ones), no longer queued; the rest keep their order."""
        taken: list[ServeEvent] = []
        kept: list[ServeEvent] = []
        for event in self._events.values():
            (taken if due is None or due(event) else kept).append(event)
        self._refill(kept)
        return taken


def _indexes(where: dict[AskKey, int | list[int]], keys: Collection[AskKey]) -> list[int]:
    """Where the events of `keys` are in the queue, no longer indexed."""
    at: list[int] = []
    for key in keys:
        found = where.pop(key, None)
        if isinstance(found, int):
            at.append(found)
        elif found is not None:
            at += found
    return at


class HistoryWriter:
    """The history file opened for writing: its transactions, the queue, inserts, retention."""

    def __init__(self, path: Path, retention: Retention | None = None, seams: Seams = PRODUCTION) -> None:
        """Of the seams, the clock (the queue's ages, retention) and the fault hook, called as
        `history` at the start of every write transaction."""
        self.path = path
        self.retention = retention or Retention()
        self.clock = seams.clock
        self._fault = seams.fault
        with Anchor(path.parent, "state dir").folder(create=True) as folder:
            # Created owner-only, and refused (ELOOP) when a link stands in its place; SQLite then
            # opens it by path: the state dir is this node's own, children never write there.
            flags = os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(path.name, flags, FILE_MODE, dir_fd=folder))
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
        # The connection's lock (reentrant: a read writes what is queued first, in its own transaction).
        self._lock = threading.RLock()
        # A new file's pages are `PAGE_SIZE` (an existing file keeps its own: SQLite fixes the size
        # when the first page is written, here by the switch to WAL).
        self._conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        if platform.SQLITE_FULLFSYNC:  # macOS: a verdict's commit reaches the drive, not its cache
            self._conn.execute("PRAGMA fullfsync=ON")
            self._conn.execute("PRAGMA checkpoint_fullfsync=ON")
        migrate(self._conn)
        self._since_prune = 0
        self._queue = Queued()
        self._claimed: dict[AskKey, ServeEvent] = {}
        self._worker_armed = False  # a delayed worker is due (set and cleared under the queue lock)
        #: When a transaction writing queued events was last refused (the clock's monotonic time).
        self._refused_at: float | None = None
        # Its own lock: the event loop queues an arrival without waiting for a transaction in progress.
        self._queue_lock = threading.Lock()
        # Asks whose verdicts are on their way to the ledger (`expect`): the worker leaves their arrivals
        # queued for that transaction (one row each, not an insert and then an update).
        self._expected: set[AskKey] = set()
        self._closed = False  # `close` has kept what was queued
        self.prune()
        self._spooled = self._queue_spooled()
        try:
            spool.keep_reserve(self.path)
        except OSError as exc:  # a state dir refused here is refused, and said, by the history itself
            log.warning("no space reserved for the history's last rows: %s", exc)

    def _queue_spooled(self) -> bool:
        """What an earlier run could not write, queued first and written now: whether it stays spooled."""
        spooled = spool.load(self.path)
        if not spooled:
            return False
        with self._queue_lock:  # first: an earlier run's rows before this run's
            self._queue = Queued([*spooled, *self._queue])
        try:
            self.write_arrivals()
        except Exception as exc:  # still queued and still spooled: the next transaction writes them
            log.error("writing %d spooled rows to the history failed: %s", len(spooled), exc)
            return True
        spool.discard(self.path)
        return False

    def close(self, keep_open: bool = False, wait_s: float | None = None) -> None:
        """What the history still cannot write is spooled beside it for the next open. Once: a later
        call does nothing. `keep_open`: the connection stays open, for a process that ends while its
        serving may still be writing (a thread would meet a closed database, and deny for safety an
        answer it could have recorded); `wait_s`: how long a transaction in progress is waited for
        (none: as long as it takes), after which nothing is kept, said."""
        if not self._lock.acquire(timeout=-1 if wait_s is None else wait_s):
            log.error("the history was busy as this process ended: %d queued rows were not kept",
                      len(self._queue))
            return
        try:
            if self._closed:
                return
            self._closed = True
            self._keep_queued()
            if not keep_open:
                self._conn.close()
        finally:
            self._lock.release()

    def _keep_queued(self) -> None:
        try:
            self.write_arrivals()
        except Exception as exc:
            log.error("%d queued rows are kept beside the history for the next start: %s",
                      len(self._queue), exc)
        with self._queue_lock:
            queued = self._queue.take()
        try:
            if queued:
                spool.save(self.path, queued)
            elif self._spooled:
                spool.discard(self.path)
        except OSError as exc:
            log.error("%d queued rows were not written to the history: %s", len(queued), exc)

    def queries(self) -> HistoryReader:
        """Queries on this connection; each writes what is queued first (see `reading`)."""
        return HistoryReader(self._conn, self.reading)

    # -- the queue ------------------------------------------------------------------------------

    def queue(self, event: ServeEvent) -> None:
        """Queued: a burst's arrivals (and unrecorded fail-safe answers) are written together (see the
        module docstring). With no loop running, written at once."""
        assert event.parsed is not None
        if self.keep(event) is None:
            self.write_arrivals()

    def keep(self, event: ServeEvent) -> asyncio.AbstractEventLoop | None:
        """Queued as it is, written in order by the next transaction (with a loop running, the worker's
        within `ARRIVALS_WAIT_S`), else spooled at exit: a note the disk refused when it came. The
        loop running, if any."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._queue_lock:
            self._queue.append(event)
            if event.kind != "arrived":
                self._expected.discard(event.key)  # its verdict came another way: the arrival is due
            arm = loop is not None and not self._worker_armed
            if arm:
                self._worker_armed = True
        if arm and loop is not None:
            self._worker_later(loop)
        return loop

    def _worker_later(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.call_later(ARRIVALS_WAIT_S, loop.run_in_executor, None, self.write_arrivals_soon, loop)

    def write_arrivals_soon(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """The arrivals that waited `ARRIVALS_WAIT_S` (by the clock of their events); if younger ones
        are left queued, the worker comes back for them. Without `loop`, all of them, and once.
        Never raises: what cannot be written stays queued."""
        try:
            self.write_arrivals(self.clock.wall() - ARRIVALS_WAIT_S if loop is not None else None)
        except Exception as exc:  # kept queued: the next transaction writes them
            log.error("writing arrivals to the history failed: %s", exc)
        if loop is None:
            return
        with self._queue_lock:
            again = self._worker_armed = bool(self._queue)
        if again:
            try:
                loop.call_soon_threadsafe(self._worker_later, loop)
            except RuntimeError:  # the loop is closed: `close` writes them
                self._worker_armed = False

    def write_arrivals(self, until: float | None = None) -> None:
        """Write the queued events not written yet (those observed at `until` or before, but for the
        arrivals whose verdicts are expected), in one transaction."""
        with self._lock:
            with self._queue_lock:  # the loop's thread appends meanwhile
                due = any(self._due(event, until) for event in self._queue)
            if due:
                with self.transaction(until=until):
                    pass

    def _due(self, event: ServeEvent, until: float | None) -> bool:
        """Whether the worker's transaction (with `until`) writes this queued event; without `until`,
        every event is due."""
        if until is None:
            return True
        return event.at <= until and not (event.kind == "arrived" and event.key in self._expected)

    def expect(self, key: AskKey) -> None:
        """The verdict of `key` is on its way to the ledger: its queued arrival waits for it, however
        long a burst keeps it queued (`unexpect` once recorded, or refused)."""
        with self._queue_lock:
            self._expected.add(key)

    def unexpect(self, keys: Collection[AskKey]) -> None:
        with self._queue_lock:
            if self._expected:  # a burst answered in its intakes' trips expected none: no look per key
                self._expected.difference_update(keys)

    def queued_closes(self, session_id: str, request_ids: Collection[str]) -> dict[str, VerdictRow]:
        """The fail-safe answers still queued for these requests, by id, as the rows they will be: a
        child read each, and the ledger's lookups (a connection of their own) do not see the queue. A
        start on a disk still full holds an earlier run's only here: unseen, a request the stop left
        was judged again (a second answer under a used id) or our denial called forged."""
        with self._queue_lock:
            closes = self._queue.closes()
        found: dict[str, VerdictRow] = {}
        if not closes:
            return found
        wanted = set(request_ids)
        for event in closes:
            if event.key.session_id != session_id or event.parsed is None or event.response is None:
                continue
            if (request_id := event.parsed.request.id) in wanted:  # as `fail_safe_columns` will write it
                body = encode_response(event.response)
                found[request_id] = VerdictRow(body, written=True, outcome="fail-safe", ended=True,
                                               decided_at=event.at)
        return found

    # -- rows outside serving -------------------------------------------------------------------

    def insert_rows(self, rows: Sequence[dict[str, object]]) -> int:
        """Bulk insert (imports, benchmarks); rows whose `import_key` is already stored are skipped."""
        with self.transaction() as table:
            return table.insert_new(rows)

    # -- retention ------------------------------------------------------------------------------

    def prune(self, now: float | None = None, limits: Retention | None = None, *, dry: bool = False) -> int:
        """Apply the retention limits (or `limits`, for an explicit prune); a verdict not yet known
        written is never pruned (one that ended unwritten, its child gone, is). `dry`: only count."""
        limits = limits or self.retention
        if not dry:
            self._since_prune = 0
        cutoff = None
        if limits.max_age_s is not None:
            cutoff = (self.clock.wall() if now is None else now) - limits.max_age_s
        # Queued arrivals stay queued: a burst's verdicts write each with its arrival as one row.
        with self.transaction(arrivals=False) as table:
            return table.prune(cutoff, limits.max_rows, dry=dry)

    def _maybe_prune(self) -> None:
        if self._since_prune >= self.retention.every:
            self.prune()

    # -- transactions ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """A read on this connection: under its lock, what is queued written first. A queue the disk
        refuses now (full) stays queued, said in the log, and the read goes on over what is stored: a
        person's review of the history does not fail with the disk. Within `READ_AFTER_REFUSAL_S` of a
        refused write of the queue, a read does not try again (the next transaction does)."""
        with self._lock:
            if self._queue and not self._refused_lately():
                try:
                    self.write_arrivals()
                except (sqlite3.Error, OSError) as exc:  # kept queued: the next transaction writes them
                    log.warning("the history's queue could not be written before a read (%s): the read "
                                "shows what is stored", exc)
            yield

    def _refused_lately(self) -> bool:
        """Whether a transaction writing queued events was refused within `READ_AFTER_REFUSAL_S`."""
        refused = self._refused_at
        return refused is not None and self.clock.monotonic() - refused < READ_AFTER_REFUSAL_S

    def take_claimed(self, key: AskKey) -> ServeEvent | None:
        """In a transaction with `claim`: the queued arrival of `key`, which the caller writes itself
        (None when none was queued)."""
        return self._claimed.pop(key, None)

    def claimer(self) -> Callable[[AskKey], ServeEvent | None] | None:
        """`take_claimed`, or None when this transaction claimed no arrival (a burst answered in its
        intakes' trips): the caller then looks for none, key by key."""
        return self.take_claimed if self._claimed else None

    @contextlib.contextmanager
    def transaction(
        self, durable: bool = False, claim: Collection[AskKey] | None = None, arrivals: bool = True,
        until: float | None = None, only: Collection[AskKey] | None = None,
    ) -> Iterator[AsksTable]:
        """A write transaction on the asks table; queued events are written first, in it (every row it
        looks for exists; with `until`, only those observed then or before: the others stay queued).

        With `claim`, only the queued events of those keys are taken: a lone arrival is not written,
        the caller takes it (`take_claimed`) and writes it with what it records (a burst's verdict
        joins its arrival in one row instead of an insert and an update); a key with more queued is
        written first, in order (`Queued.take_claims`); the rest stay queued for their own verdicts.
        Without `arrivals` the queue is left as it is (the caller touches only rows that were never
        queued: recorded verdicts). With `only`, the queued events of those keys alone are
        written first, the rest stay queued: a note on one request costs its own rows, not a backlog's
        (on a full disk, each note rewrote thousands of queued rows, was refused, and put them back)."""
        with self._lock:
            conn = self._conn
            if durable:
                conn.execute("PRAGMA synchronous=FULL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                first: list[ServeEvent] = []  # written before the caller's statements
                claimed: list[ServeEvent] = []
                with self._queue_lock:
                    if claim is not None:
                        # A lone arrival is claimed; a key with more is written first, in order.
                        claimed, first = self._queue.take_claims(claim)
                        pending = [*first, *claimed]
                    elif only is not None:
                        pending = self._queue.take_keys(only)
                    elif arrivals and until is not None:
                        pending = self._queue.take(lambda event: self._due(event, until))
                    elif arrivals:
                        pending = self._queue.take()
                    else:
                        pending = []
                    if claim is None:
                        first = pending
                self._claimed = {event.key: event for event in claimed}
                table = AsksTable(conn)
                try:
                    self._fault("history")
                    table.write_queued(first)
                    yield table
                    table.write_queued(list(self._claimed.values()))  # any the caller left
                    conn.execute("COMMIT")  # refused (a full disk): SQLite rolls back, the events go back
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    with self._queue_lock:
                        self._queue = Queued([*pending, *self._queue])  # written by the next transaction
                    if pending:
                        self._refused_at = self.clock.monotonic()
                    raise
                if pending:
                    self._refused_at = None
                self._since_prune += table.added
            finally:
                self._claimed = {}
                if durable:
                    conn.execute("PRAGMA synchronous=NORMAL")
        self._maybe_prune()
