"""One SQLite row per ask served: the ledger the serving core writes before answering, its observer,
and the queries over it, in one `HistoryStore`.

The store holds a writer (`core.history.transactions`: the file's transactions, the queue of what is
observed but not written yet, retention, and the spool of what a failing history could not write by
exit) and readers (`core.history.queries`): one on the writer's connection for the store's own
queries, and a read-only connection of its own for the ledger's lookups. Each method here says what
happened in one call to the asks table (`core.history.table`, which holds every statement) inside
one of the writer's transactions; rows and their columns are in `core.history.rows`.

Durability order (the reason this is a ledger and not a log): `record_verdicts` commits a batch
with `synchronous=FULL` before the publisher (`core.serving.publisher`) links its responses into place, so
a verdict can never be visible without being in the history; on restart `recorded_verdicts` hands
the core the exact bytes to publish instead of judging again. Everything else (arrival, shown,
written, withdrawn) commits with `synchronous=NORMAL`: it survives a killed process, and losing it
to a power cut only loses display data, never an answer. A verdict the ledger refused was replaced
by a fail-safe denial (`core.serving.publisher`); its `answered` event (with the reason) closes the row as
`fail-safe`, queued like an arrival until a transaction works.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Collection, Sequence
from operator import attrgetter
from pathlib import Path

from core.forwarding.inbox import display_name
from core.history.queries import HistoryFilter, HistoryReader, Summary
from core.history.rows import HistoryRow
from core.history.table import NOTES
from core.history.transactions import HistoryWriter, Retention
from core.seams import PRODUCTION, Seams
from core.serving.verdicts import VerdictRecord, VerdictRow, WrittenMark
from core.text import log_safe
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import RequestRejected, parse_request
from core.wire.request import ParsedRequest

log = logging.getLogger("pi_authorizer.history")

HISTORY_FILE = "history.sqlite3"
#: Rows held for their written marks (`HistoryStore._held`) before the ones never marked are forgotten.
HELD_MAX = 8192


class HistoryStore:
    """The history file: a `core.serving.Ledger`, a serve observer (`observe`), and its queries."""

    @classmethod
    def in_state_dir(
        cls, state_dir: Path, retention: Retention | None = None, seams: Seams = PRODUCTION
    ) -> HistoryStore:
        return cls(state_dir / HISTORY_FILE, retention, seams)

    def __init__(self, path: Path, retention: Retention | None = None, seams: Seams = PRODUCTION) -> None:
        """Of the seams, the clock and the fault hook (a history transaction's stage: `history`)."""
        self.path = path
        self.clock = seams.clock
        self._writer = HistoryWriter(path, retention, seams)
        self.retention = self._writer.retention
        self._queries = self._writer.queries()
        self._lookups = self.reader()
        #: The row holding each verdict recorded here and not noted written yet, by session and request
        #: id (`record_verdicts`), where its written mark goes without a look (`mark_written`).
        self._held: dict[tuple[str, str], int] = {}
        #: Files set aside whose rows were committed before they moved (`record_quarantined`), until
        #: their events are observed (which then write nothing more).
        self._set_aside: set[tuple[AskKey, str | None]] = set()

    def close(self, keep_open: bool = False, wait_s: float | None = None) -> None:
        """What the history still cannot write is spooled beside it for the next open (`keep_open`,
        `wait_s`: `HistoryWriter.close`)."""
        if not keep_open:
            self._lookups.close()
        self._writer.close(keep_open, wait_s)

    def reader(self) -> HistoryReader:
        """A second, read-only connection (for a thread worker: never holds up the ledger). Arrivals
        still queued are written first, so it sees every ask observed so far (if the history cannot
        write now, they stay queued and the read goes on without them)."""
        self._writer.write_arrivals_soon()
        return HistoryReader.read_only(self.path)

    # -- queries (what is queued is written first: they see every ask observed) -----------------

    def ids(self, where: HistoryFilter | None = None, limit: int | None = None) -> list[int]:
        """Matching row ids, newest first: the review list pages through these."""
        return self._queries.ids(where, limit)

    def rows(self, ids: Sequence[int]) -> list[HistoryRow]:
        """The rows with these ids, in the order given."""
        return self._queries.rows(ids)

    def query(self, where: HistoryFilter | None = None, limit: int | None = None) -> list[HistoryRow]:
        """The newest `limit` matching rows, newest first."""
        return self._queries.query(where, limit)

    def summary(self, where: HistoryFilter | None = None) -> Summary:
        """What the review screen's summary line says about the matching rows."""
        return self._queries.summary(where)

    def distinct(self, column: str) -> list[str]:
        """Values seen in one filterable column (for filter hints and suggestion checks)."""
        return self._queries.distinct(column)

    # -- writing outside serving: imports, retention, the queue ---------------------------------

    def insert_rows(self, rows: Sequence[dict[str, object]]) -> int:
        """Bulk insert (imports, benchmarks); rows whose `import_key` is already stored are skipped."""
        return self._writer.insert_rows(rows)

    def prune(self, now: float | None = None) -> int:
        """Apply the retention limits now; returns how many rows were removed."""
        return self._writer.prune(now)

    def prune_with(self, limits: Retention, now: float | None = None) -> int:
        """`history prune`: apply these limits once (not the store's own); how many rows went."""
        return self._writer.prune(now, limits)

    def prune_count(self, limits: Retention, now: float | None = None) -> int:
        """How many rows `prune_with(limits)` would delete now (deleting none)."""
        return self._writer.prune(now, limits, dry=True)

    def write_arrivals(self, until: float | None = None) -> None:
        """Write what is queued (observed at `until` or before) now, in one transaction."""
        self._writer.write_arrivals(until)

    # -- the Ledger protocol --------------------------------------------------------------------

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        """Durable on return (one fsynced transaction): the publisher links the responses only after this.

        A verdict whose arrival is still queued (a burst) is written with it as one new row; any
        other updates the open row of its request file (or a row made for it)."""
        keys = [verdict.key for verdict in verdicts]  # not a set: a key is hashed where it is looked up
        try:
            self._record_verdicts(verdicts, keys)
        except BaseException:  # refused: a row held before for one of them may not be the newest now
            for verdict in verdicts:
                self._held.pop((verdict.key.session_id, verdict.request_id), None)
            raise
        finally:
            self._writer.unexpect(keys)  # recorded, or refused: a queued arrival is written as usual

    def expect(self, key: AskKey) -> None:
        """`Ledger.expect`: the arrival of `key` waits in the queue for its verdict's transaction."""
        self._writer.expect(key)

    def _record_verdicts(self, verdicts: Sequence[VerdictRecord], keys: list[AskKey]) -> None:
        now = self.clock.wall()
        with self._writer.transaction(durable=True, claim=keys) as table:
            held = table.record_verdicts(verdicts, self._writer.claimer(), now)
        if len(self._held) > HELD_MAX:  # marks that never came (answers never written): looked for then
            self._held.clear()
        if len(held) < len(verdicts):
            # A verdict whose row is not known (the table's ids at SQLite's largest): a row held before
            # for its request id is not the newest now; its mark looks for the newest (review, F2).
            for verdict in verdicts:
                if (key := (verdict.key.session_id, verdict.request_id)) not in held:
                    self._held.pop(key, None)
        self._held.update(held)  # committed: these rows hold the verdicts

    def mark_written(self, marks: Sequence[WrittenMark]) -> None:
        """The responses were linked (or found already there): for their children the asks have ended.
        A plain mark (linked, no why) of a verdict recorded here goes to the row that holds it, by id
        (a burst's: one statement for a batch); any other to its request id's newest row with a
        response."""
        now = self.clock.wall()
        take = self._held.pop
        rows: list[int] = []
        looked: list[WrittenMark] = []
        for mark in marks:
            row = take((mark.key.session_id, mark.request_id), None)
            if row is not None and mark.written and mark.why is None:
                rows.append(row)
            else:
                looked.append(mark)
        # Rows with a response: recorded, never queued.
        with self._writer.transaction(arrivals=False) as table:
            if rows:
                table.mark_written_rows(rows, now)
            if looked:
                table.mark_written(looked, now)

    def record_quarantined(self, event: ServeEvent) -> None:
        """`Ledger.record_quarantined`: the row of a file being set aside, committed before it moves (on
        the quarantine's thread); the same event observed after the move adds no second row."""
        self._quarantined(event)
        self._set_aside.add((event.key, event.reason))

    def note_set_aside_answered(self, key: AskKey, raw: bytes) -> None:
        """`Ledger.note_set_aside_answered`, committed before the file moves (`synchronous=NORMAL`: it
        survives the killed process it is for; a flood of junk files pays no fsync more per file)."""
        with self._writer.transaction(arrivals=False) as table:
            table.note_set_aside_answered(key, raw)

    def set_aside_answered(self, key: AskKey, raw: bytes) -> bool:
        """`Ledger.set_aside_answered`."""
        with self._writer.transaction(arrivals=False) as table:
            return table.set_aside_answered(key, raw)

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, VerdictRow]:
        """Read on a connection of its own (WAL), so an intake never waits for a batch's transaction in
        progress: a verdict is committed before its request's name can be taken in again (the name is
        freed only once the publisher removed the answered request). A fail-safe answer whose close is
        still queued counts too (`HistoryWriter.queued_closes`): a used id is never answered again."""
        found = self._lookups.recorded_verdicts(session_id, request_ids)
        found.update(self._writer.queued_closes(session_id, request_ids))
        return found

    # -- the observer ---------------------------------------------------------------------------

    def observe(self, event: ServeEvent) -> None:
        """Subscribe this to `ServingCore.subscribe` (with `observe_all`): every request file's fate lands
        in a row."""
        kind = event.kind
        if kind == "answered":
            if event.reason is not None:  # the ledger refused its verdict: its row closes fail-safe
                self._writer.queue(event)
            return  # else its row was written with its verdict
        if kind == "arrived":
            self._writer.queue(event)
        elif kind in NOTES:
            self._note(event)
        elif kind in ("quarantined", "forged"):
            if (event.key, event.reason) in self._set_aside:
                self._set_aside.discard((event.key, event.reason))  # its row is written already
            else:
                self._quarantined(event)
        elif kind == "not_serving":
            with self._writer.transaction() as table:
                table.not_serving(event)

    def _note(self, event: ServeEvent) -> None:
        """A note on one request writes first only what is queued under its name (`only`): the rows it
        looks for exist, and a backlog a full disk refuses is not rewritten (and refused) per note. A
        note the disk refuses is queued after them, written in order by the next transaction (or
        spooled at exit): raised into the event loop, it was dropped (campaign10, finding 3)."""
        try:
            with self._writer.transaction(only=(event.key,)) as table:
                table.note(event)
        except (sqlite3.Error, OSError) as exc:
            name = log_safe(display_name(event.key.name))
            log.warning("session=%s request=%s: the history's note %r waits for the disk: %s",
                        log_safe(event.key.session_id), name, event.kind, exc)
            self._writer.keep(event)

    def observe_all(self, events: Sequence[ServeEvent]) -> None:
        """`observe` each of a run of events (`ServingCore.subscribe`'s `run`): a burst's answers whose
        rows were written with their verdicts (`answered`, no reason) need nothing, found without a
        Python step per event."""
        count, kinds = len(events), list(map(attrgetter("kind"), events))
        if kinds.count("answered") == count and list(map(attrgetter("reason"), events)).count(None) == count:
            return
        for event in events:
            self.observe(event)

    def reconcile_open(
        self, session_id: str, present: Collection[str], at: float | None = None,
        delivered: Callable[[str, bytes], bool] | None = None,
    ) -> int:
        """At start, before serving: an open row whose request file is gone was withdrawn while no
        one served the session (a `left` one was most likely answered elsewhere and stays `left`). A
        row with a verdict never noted written whose request file is gone ended too (a run killed
        between linking the response and noting it): `delivered(request_id, body)` says whether the
        response holds those very bytes (written), else its child read it or gave up, unknown which.
        Either way its id is used: a request replayed under it is never answered again. Returns how
        many rows were closed."""
        ended = self.clock.wall() if at is None else at
        with self._writer.transaction() as table:
            return table.reconcile_open(session_id, present, ended, delivered)

    def mark_shown(self, key: AskKey, at: float | None = None) -> None:
        """The TUI showed this ask to the person (the first time counts). On a disk that refuses it
        (full), said in the log and not noted: it is called from the app's message handlers, and an
        exception there ends a Textual app, here while it showed the person an ask."""
        try:
            with self._writer.transaction(only=(key,)) as table:
                table.shown(key, self.clock.wall() if at is None else at)
        except (sqlite3.Error, OSError) as exc:
            _not_noted(key, "when it was shown", exc)

    def mark_batch(self, key: AskKey, raw: bytes, size: int) -> None:
        """The person decided this ask (these very bytes) as one of a batch of `size`: its decider says
        so (the wire's `decidedBy` has no batch kind a child accepts, so only this history can). On a
        disk that refuses it, said in the log and not noted (as `mark_shown`)."""
        try:
            with self._writer.transaction(only=(key,)) as table:
                table.in_batch(key, raw, size)
        except (sqlite3.Error, OSError) as exc:
            _not_noted(key, f"that it was decided in a batch of {size}", exc)

    def _quarantined(self, event: ServeEvent) -> None:
        parsed: ParsedRequest | None = None
        if event.raw is not None:
            with contextlib.suppress(RequestRejected):
                parsed = parse_request(event.raw)
        with self._writer.transaction(only=(event.key,)) as table:
            table.quarantine(event, parsed)


def _not_noted(key: AskKey, what: str, exc: BaseException) -> None:
    log.warning("session=%s request=%s: the history could not note %s: %s", log_safe(key.session_id),
                log_safe(display_name(key.name)), what, exc)
