"""One SQLite row per ask served: the ledger the serving core writes before answering, its observer,
and the queries over it, in one `HistoryStore`.

The store holds a writer (`core.history.transactions`: the file's transactions, the queue of what is
observed but not written yet, retention, and the spool of what a failing history could not write by
exit) and readers (`core.history.queries`): one on the writer's connection for the store's own
queries, and a read-only connection of its own for the ledger's lookups. Rows and their columns are
in `core.history.rows`.

Durability order (the reason this is a ledger and not a log): `record_verdicts` commits a batch
with `synchronous=FULL` before the publisher (`core.serving.publisher`) links its responses into place, so
a verdict can never be visible without being in the history; on restart `recorded_verdicts` hands
the core the exact bytes to publish instead of judging again. Everything else (arrival, shown,
written, withdrawn) commits with `synchronous=NORMAL`: it survives a killed process, and losing it
to a power cut only loses display data, never an answer. A verdict the ledger refused was replaced
by a fail-safe denial (`core.serving.publisher`); its `answered` event (with the reason) closes the row as
`fail-safe`, queued like an arrival until a transaction works.
"""

# SQL text here is assembled from constant fragments only; every value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from core.history.open_rows import OPEN, end_unanswered, open_row, open_rows, unnoted_rows, unwritten_row
from core.history.queries import HistoryFilter, HistoryReader, Summary
from core.history.rows import HistoryRow, arrival_values, describe_decider, dumps, outcome_kind, storable
from core.history.transactions import HistoryWriter, Retention
from core.seams import PRODUCTION, Seams
from core.serving.verdicts import VerdictRecord, VerdictRow, WrittenMark
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.decisions import decision_source_json
from core.wire.reader import RequestRejected, parse_request
from core.wire.request import ParsedRequest

HISTORY_FILE = "history.sqlite3"
#: Why a recorded verdict's row ended at a restart with neither its request nor its response there.
UNNOTED_GONE = ("its request and response were gone when serving resumed: its child read this answer or "
                "stopped waiting (not noted before a restart)")


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

    def close(self) -> None:
        """What the history still cannot write is spooled beside it for the next open."""
        self._lookups.close()
        self._writer.close()

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
        keys = {verdict.key for verdict in verdicts}
        try:
            self._record_verdicts(verdicts, keys)
        finally:
            self._writer.unexpect(keys)  # recorded, or refused: a queued arrival is written as usual

    def expect(self, key: AskKey) -> None:
        """`Ledger.expect`: the arrival of `key` waits in the queue for its verdict's transaction."""
        self._writer.expect(key)

    def _record_verdicts(self, verdicts: Sequence[VerdictRecord], keys: set[AskKey]) -> None:
        now = self.clock.wall()
        with self._writer.transaction(durable=True, claim=keys) as conn:
            found = open_rows(conn, [verdict.key for verdict in verdicts])
            fresh: list[dict[str, object]] = []
            for verdict in verdicts:
                arrival = self._writer.take_claimed(verdict.key)
                row = found.get(verdict.key)
                if row is None and arrival is not None:
                    assert arrival.parsed is not None
                    values = arrival_values(verdict.key, arrival.parsed, arrival.at, arrival.raw)
                    values.update(_verdict_columns(verdict, now, arrival.at))
                    fresh.append(values)
                    continue
                # The person's time counts from when the ask was shown; a rule's from its arrival.
                row = row or unwritten_row(conn, verdict.key)  # decided again after a failed write
                row_id, started = row or self._writer.insert_arrival(conn, verdict.key, verdict.parsed, now)
                columns = _verdict_columns(verdict, now, started)
                assignments = ", ".join(f"{name} = ?" for name in columns)
                conn.execute(
                    f"UPDATE asks SET {assignments} WHERE id = ?", storable((*columns.values(), row_id))
                )
            self._writer.insert_many(conn, fresh)

    def mark_written(self, marks: Sequence[WrittenMark]) -> None:
        """The responses were linked (or found already there): for their children the asks have ended."""
        now = self.clock.wall()
        with self._writer.transaction(arrivals=False) as conn:  # rows with a response: recorded, never queued
            conn.executemany(
                "UPDATE asks SET written = CASE outcome WHEN 'contested' THEN 0 ELSE ? END, "
                "reason = COALESCE(?, reason), ended_at = CASE WHEN ? THEN COALESCE(ended_at, ?) "
                "ELSE ended_at END "
                "WHERE id = (SELECT id FROM asks WHERE served_session = ? AND request_id = ? "
                "AND response IS NOT NULL ORDER BY id DESC LIMIT 1)",
                [(int(m.written), m.why, m.written or m.why is not None, now, m.key.session_id, m.request_id)
                 for m in marks],
            )

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, VerdictRow]:
        """Read on a connection of its own (WAL), so an intake never waits for a batch's transaction in
        progress: a verdict is committed before its request's name can be taken in again (the name is
        freed only once the publisher removed the answered request)."""
        return self._lookups.recorded_verdicts(session_id, request_ids)

    # -- the observer ---------------------------------------------------------------------------

    def observe(self, event: ServeEvent) -> None:
        """Subscribe this to `ServingCore.subscribe`: every request file's fate lands in a row."""
        if event.kind == "arrived" or (event.kind == "answered" and event.reason is not None):
            self._writer.queue(event)  # an answer with a reason: the ledger refused its verdict
        elif event.kind == "withdrawn":
            self._withdrawn(event)
        elif event.kind == "left":
            self._set_open(event.key, "outcome = 'left'", ())
        elif event.kind == "answer_failed":
            self._set_open(event.key, "reason = ?", (event.reason,))
        elif event.kind in ("quarantined", "forged"):
            self._quarantined(event)
        elif event.kind == "contested":
            self._contested(event)
        elif event.kind == "not_serving":
            self._not_serving(event)

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
        with self._writer.transaction() as conn:
            rows = conn.execute(
                "SELECT id, request_name FROM asks WHERE served_session = ? AND verdict IS NULL "
                "AND outcome IN (?, ?) AND ended_at IS NULL",
                (session_id, *OPEN),
            ).fetchall()
            gone = [row_id for row_id, name in rows if name not in present]
            for row_id in gone:
                conn.execute(
                    "UPDATE asks SET ended_at = ?, outcome = CASE outcome WHEN 'left' THEN 'left' "
                    "ELSE 'withdrawn' END, reason = COALESCE(reason, ?) WHERE id = ?",
                    (ended, "the request file was gone when serving resumed", row_id),
                )
            decided = [
                row for row in unnoted_rows(conn, session_id) if row[1] not in present
            ]
            for row_id, _, request_id, body in decided:
                if delivered is not None and request_id is not None and delivered(request_id, body):
                    conn.execute("UPDATE asks SET written = 1, ended_at = ? WHERE id = ?", (ended, row_id))
                else:
                    conn.execute(
                        "UPDATE asks SET ended_at = ?, reason = COALESCE(reason, ?) WHERE id = ?",
                        (ended, UNNOTED_GONE, row_id),
                    )
        return len(gone) + len(decided)

    def mark_shown(self, key: AskKey, at: float | None = None) -> None:
        """The TUI showed this ask to the person (the first time counts)."""
        self._set_open(key, "shown_at = COALESCE(shown_at, ?)", (self.clock.wall() if at is None else at,))

    def mark_batch(self, key: AskKey, raw: bytes, size: int) -> None:
        """The person decided this ask (these very bytes) as one of a batch of `size`: its decider says
        so (the wire's `decidedBy` has no batch kind a child accepts, so only this history can)."""
        with self._writer.transaction() as conn:
            conn.execute(
                "UPDATE asks SET decider = COALESCE(decider, 'person') || ? WHERE id = "
                "(SELECT id FROM asks WHERE served_session = ? AND request_name = ? AND raw = ? "
                "AND verdict IS NOT NULL ORDER BY id DESC LIMIT 1) "
                "AND COALESCE(decider, '') NOT LIKE '%batch of%'",
                storable((f", in a batch of {size}", key.session_id, key.name, raw)),
            )

    def _withdrawn(self, event: ServeEvent) -> None:
        with self._writer.transaction() as conn:
            found = open_row(conn, event.key)
            if found is None:
                if end_unanswered(conn, event.key, event.at, event.reason) or event.parsed is None:
                    return
                found = self._writer.insert_arrival(conn, event.key, event.parsed, event.at)
            # A left ask that vanishes was most likely answered elsewhere: it stays `left`.
            # Why, when it was not the child (decided by another approver): kept on the row.
            conn.execute(
                "UPDATE asks SET ended_at = ?, outcome = CASE outcome WHEN 'left' THEN 'left' "
                "ELSE 'withdrawn' END, reason = COALESCE(?, reason) WHERE id = ?",
                storable((event.at, event.reason, found[0])),
            )

    def _not_serving(self, event: ServeEvent) -> None:
        """A session row (no request name): the session stopped being served and why, e.g. `another
        server answers session S`, so the history says when this node was not the one answering."""
        with self._writer.transaction() as conn:
            row_id, _ = self._writer.insert_arrival(conn, AskKey(event.key.session_id, ""), None, event.at)
            conn.execute(
                "UPDATE asks SET outcome = 'not-serving', reason = ?, ended_at = ? WHERE id = ?",
                storable((event.reason, event.at, row_id)),
            )

    def _contested(self, event: ServeEvent) -> None:
        """Another server answered this request too: its row (the verdict recorded, or the ask still open)
        never says this node's answer was delivered; the verdict recorded is kept."""
        with self._writer.transaction() as conn:
            conn.execute(
                "UPDATE asks SET outcome = 'contested', written = 0, reason = ?, "
                "ended_at = COALESCE(ended_at, ?) WHERE id = (SELECT id FROM asks WHERE served_session = ? "
                "AND request_name = ? AND (response IS NOT NULL OR ended_at IS NULL) "
                "ORDER BY id DESC LIMIT 1)",
                storable((event.reason, event.at, event.key.session_id, event.key.name)),
            )

    def _set_open(self, key: AskKey, assignment: str, params: Sequence[object]) -> None:
        with self._writer.transaction() as conn:
            found = open_row(conn, key)
            if found is not None:
                conn.execute(f"UPDATE asks SET {assignment} WHERE id = ?", storable((*params, found[0])))

    def _quarantined(self, event: ServeEvent) -> None:
        parsed: ParsedRequest | None = None
        if event.raw is not None:
            with contextlib.suppress(RequestRejected):
                parsed = parse_request(event.raw)
        with self._writer.transaction() as conn:
            row_id, _ = self._writer.insert_arrival(conn, event.key, parsed, event.at, event.raw)
            conn.execute(
                "UPDATE asks SET outcome = ?, reason = ?, ended_at = ? WHERE id = ?",
                storable((event.kind, event.reason, event.at, row_id)),
            )


def _verdict_columns(verdict: VerdictRecord, now: float, started: float) -> dict[str, object]:
    """What recording a verdict stores in its row (`started`: when the ask arrived, or was shown)."""
    response = verdict.response
    source = response.decided_by
    return {
        "decided_at": now,
        "verdict": response.state,
        "decided_by": dumps(decision_source_json(source)) if source is not None else None,
        "decider": describe_decider(source, verdict.outcome, verdict.carried_to),
        "responder_session": response.responder_session_id,
        "decide_ms": (now - started) * 1000,
        "outcome": outcome_kind(verdict.outcome, source),
        "reason": response.denial_reason,
        "response": verdict.body,
        "written": None,
    }
