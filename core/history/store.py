"""One SQLite row per ask served: the ledger the serving core writes before answering, and its observer.

Rows and their columns are in `core.history.rows`, queries in `core.history.reader`, the file's
transactions, arrival queue and retention in `core.history.writer`.

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
import sqlite3
from collections.abc import Collection, Sequence
from pathlib import Path
from urllib.parse import quote

from core.clock import SYSTEM_CLOCK, Clock
from core.history.open_rows import OPEN, end_unanswered, holds_response, open_row, open_rows, unwritten_row
from core.history.reader import HistoryReader
from core.history.rows import arrival_values, describe_decider, dumps, outcome_kind, storable
from core.history.spool import SpooledWriter
from core.history.writer import Retention
from core.seams import FaultHook, no_fault
from core.serving import ServeEvent
from core.serving.asks import AskKey
from core.serving.verdicts import RecordedVerdict, VerdictRecord, WrittenMark
from core.wire.decisions import decision_source_json
from core.wire.reader import RequestRejected, parse_request
from core.wire.request import ParsedRequest
from core.wire.response import encode_response

HISTORY_FILE = "history.sqlite3"


class HistoryStore(SpooledWriter):
    """The history file: a `core.serving.Ledger`, a serve observer (`observe`), and its queries."""

    @classmethod
    def in_state_dir(
        cls,
        state_dir: Path,
        retention: Retention | None = None,
        clock: Clock = SYSTEM_CLOCK,
        fault: FaultHook = no_fault,
    ) -> HistoryStore:
        return cls(state_dir / HISTORY_FILE, retention, clock, fault)

    def __init__(self, path: Path, retention: Retention | None = None, clock: Clock = SYSTEM_CLOCK,
                 fault: FaultHook = no_fault) -> None:
        super().__init__(path, retention, clock, fault)
        self._lookups = self.reader()

    def close(self) -> None:
        self._lookups.close()
        super().close()

    def reader(self) -> HistoryReader:
        """A second, read-only connection (for a thread worker: never holds up the ledger). Arrivals
        still queued are written first, so it sees every ask observed so far (if the history cannot
        write now, they stay queued and the read goes on without them)."""
        self._write_arrivals_soon()
        uri = f"file:{quote(str(self.path))}?mode=ro"
        return HistoryReader(sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=10))

    # -- the Ledger protocol --------------------------------------------------------------------

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        """Durable on return (one fsynced transaction): the publisher links the responses only after this.

        A verdict whose arrival is still queued (a burst) is written with it as one new row; any
        other updates the open row of its request file (or a row made for it)."""
        now = self.clock.wall()
        with self._tx(durable=True, claim={verdict.key for verdict in verdicts}) as conn:
            found = open_rows(conn, [verdict.key for verdict in verdicts])
            fresh: list[dict[str, object]] = []
            for verdict in verdicts:
                arrival = self._claimed.pop(verdict.key, None)
                row = found.get(verdict.key)
                if row is None and arrival is not None:
                    assert arrival.parsed is not None
                    values = arrival_values(verdict.key, arrival.parsed, arrival.at, arrival.raw)
                    values.update(_verdict_columns(verdict, now, arrival.at))
                    fresh.append(values)
                    continue
                # The person's time counts from when the ask was shown; a rule's from its arrival.
                row = row or unwritten_row(conn, verdict.key)  # decided again after a failed write
                row_id, started = row or self._insert_arrival(conn, verdict.key, verdict.parsed, now)
                columns = _verdict_columns(verdict, now, started)
                assignments = ", ".join(f"{name} = ?" for name in columns)
                conn.execute(
                    f"UPDATE asks SET {assignments} WHERE id = ?", storable((*columns.values(), row_id))
                )
            self._insert_many(conn, fresh)

    def mark_written(self, marks: Sequence[WrittenMark]) -> None:
        """The responses were linked (or found already there): for their children the asks have ended."""
        now = self.clock.wall()
        with self._tx(arrivals=False) as conn:  # rows with a response: recorded, never queued
            conn.executemany(
                "UPDATE asks SET written = ?, ended_at = CASE WHEN ? THEN ? ELSE ended_at END "
                "WHERE id = (SELECT id FROM asks WHERE served_session = ? AND request_id = ? "
                "AND response IS NOT NULL ORDER BY id DESC LIMIT 1)",
                [(int(m.written), m.written, now, m.key.session_id, m.request_id) for m in marks],
            )

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, RecordedVerdict]:
        """Read on a connection of its own (WAL), so an intake never waits for a batch's transaction in
        progress: a verdict is committed before its request's name can be taken in again (the name is
        freed only once the publisher removed the answered request)."""
        return self._lookups.recorded_verdicts(session_id, request_ids)

    # -- the observer ---------------------------------------------------------------------------

    def observe(self, event: ServeEvent) -> None:
        """Subscribe this to `ServingCore.subscribe`: every request file's fate lands in a row."""
        if event.kind == "arrived" or (event.kind == "answered" and event.reason is not None):
            self._arrived(event)  # an answer with a reason: the ledger refused its verdict
        elif event.kind == "withdrawn":
            self._withdrawn(event)
        elif event.kind == "left":
            self._set_open(event.key, "outcome = 'left'", ())
        elif event.kind == "answer_failed":
            self._set_open(event.key, "reason = ?", (event.reason,))
        elif event.kind in ("quarantined", "forged"):
            self._quarantined(event)

    def reconcile_open(self, session_id: str, present: Collection[str], at: float | None = None) -> int:
        """At start, before serving: an open row whose request file is gone was withdrawn while no
        one served the session (a `left` one was most likely answered elsewhere and stays `left`).
        Returns how many rows were closed."""
        ended = self.clock.wall() if at is None else at
        with self._tx() as conn:
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
        return len(gone)

    def mark_shown(self, key: AskKey, at: float | None = None) -> None:
        """The TUI showed this ask to the person (the first time counts)."""
        self._set_open(key, "shown_at = COALESCE(shown_at, ?)", (self.clock.wall() if at is None else at,))

    def _write_arrivals(self, conn: sqlite3.Connection, pending: Sequence[ServeEvent]) -> None:
        """The queue: arrivals, then the fail-safe answers the ledger did not record."""
        super()._write_arrivals(conn, [event for event in pending if event.kind == "arrived"])
        for event in pending:
            if event.kind == "answered":
                self._close_unrecorded(conn, event, open_row(conn, event.key))

    def _close_unrecorded(
        self, conn: sqlite3.Connection, event: ServeEvent, found: tuple[int, float] | None
    ) -> None:
        """The fail-safe denial published when the ledger refused the verdict: the row says so, and
        keeps its bytes (a request under that id is never answered twice)."""
        assert event.parsed is not None and event.response is not None
        body = encode_response(event.response)
        if found is None and holds_response(conn, event.key, body):
            return  # already closed (a spool replayed twice)
        row_id, started = found or self._insert_arrival(conn, event.key, event.parsed, event.at)
        response, source = event.response, event.response.decided_by
        conn.execute(
            "UPDATE asks SET decided_at = ?, verdict = ?, decided_by = ?, decider = ?, "
            "responder_session = ?, decide_ms = ?, outcome = 'fail-safe', reason = ?, response = ?, "
            "written = 1, ended_at = ? WHERE id = ?",
            storable(
                (
                    event.at,
                    response.state,
                    dumps(decision_source_json(source)) if source is not None else None,
                    describe_decider(source, "fail-safe"),
                    response.responder_session_id,
                    (event.at - started) * 1000,
                    response.denial_reason,
                    body,
                    event.at,
                    row_id,
                )
            ),
        )

    def _withdrawn(self, event: ServeEvent) -> None:
        with self._tx() as conn:
            found = open_row(conn, event.key)
            if found is None:
                if end_unanswered(conn, event.key, event.at) or event.parsed is None:
                    return
                found = self._insert_arrival(conn, event.key, event.parsed, event.at)
            # A left ask that vanishes was most likely answered elsewhere: it stays `left`.
            conn.execute(
                "UPDATE asks SET ended_at = ?, outcome = CASE outcome WHEN 'left' THEN 'left' "
                "ELSE 'withdrawn' END WHERE id = ?",
                (event.at, found[0]),
            )

    def _set_open(self, key: AskKey, assignment: str, params: Sequence[object]) -> None:
        with self._tx() as conn:
            found = open_row(conn, key)
            if found is not None:
                conn.execute(f"UPDATE asks SET {assignment} WHERE id = ?", storable((*params, found[0])))

    def _quarantined(self, event: ServeEvent) -> None:
        parsed: ParsedRequest | None = None
        if event.raw is not None:
            with contextlib.suppress(RequestRejected):
                parsed = parse_request(event.raw)
        with self._tx() as conn:
            row_id, _ = self._insert_arrival(conn, event.key, parsed, event.at, event.raw)
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
        "decider": describe_decider(source, verdict.outcome),
        "responder_session": response.responder_session_id,
        "decide_ms": (now - started) * 1000,
        "outcome": outcome_kind(verdict.outcome, source),
        "reason": response.denial_reason,
        "response": verdict.body,
        "written": None,
    }
