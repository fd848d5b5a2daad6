"""One SQLite row per ask served: the ledger the serving core writes before answering, and its observer.

Rows and their columns are in `core.history.rows`, queries in `core.history.reader`.

Size: over 250 lines because `HistoryStore` is one connection and one lock: the ledger (verdicts,
marks), the observer (arrivals, withdrawals, quarantines) and retention share its transactions.

Durability order (the reason this is a ledger and not a log): `record_verdicts` commits a batch
with `synchronous=FULL` before the publisher (`core.publishing`) links its responses into place, so
a verdict can never be visible without being in the history; on restart `recorded_verdicts` hands
the core the exact bytes to publish instead of judging again. Everything else (arrival, shown,
written, withdrawn) commits with `synchronous=NORMAL`: it survives a killed process, and losing it
to a power cut only loses display data, never an answer. The arrivals of a burst are written
together: queued as they are observed and written in the next transaction (or on a worker at the
end of the event-loop turn), before anything else reads or writes the history.
"""

# SQL text here is assembled from constant fragments only; every value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from core.asks import AskKey
from core.clock import SYSTEM_CLOCK, Clock
from core.history.reader import HistoryReader
from core.history.rows import describe_decider, dumps, facts_columns, outcome_kind, storable
from core.history.schema import migrate
from core.publishing import RecordedVerdict, VerdictRecord, WrittenMark
from core.serving import ServeEvent
from core.tree import FILE_MODE, Anchor
from core.wire.decisions import decision_source_json
from core.wire.reader import RequestRejected, parse_request
from core.wire.request import ParsedRequest

HISTORY_FILE = "history.sqlite3"
log = logging.getLogger("pi_authorizer.history")

_OPEN = ("pending", "left")


@dataclass(frozen=True)
class Retention:
    """How long rows are kept. `None` disables a limit; pruning runs every `every` new rows."""

    max_age_s: float | None = 180 * 86400
    max_rows: int | None = 200_000
    every: int = 500



class HistoryStore(HistoryReader):
    """The history file: a `core.serving.Ledger`, a serve observer (`observe`), and its queries."""

    def __init__(self, path: Path, retention: Retention | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.path = path
        self.retention = retention or Retention()
        self.clock = clock
        with Anchor(path.parent, "state dir").folder(create=True) as folder:
            # Created owner-only, and refused (ELOOP) when a link stands in its place; SQLite then
            # opens it by path: the state dir is this node's own, children never write there.
            os.close(os.open(path.name, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
                             dir_fd=folder))
        super().__init__(sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10))
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        migrate(self._conn)
        self._since_prune = 0
        self._arrivals: list[ServeEvent] = []
        # Its own lock: the event loop queues an arrival without waiting for a transaction in progress.
        self._queue_lock = threading.Lock()
        self.prune()

    @classmethod
    def in_state_dir(
        cls, state_dir: Path, retention: Retention | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> HistoryStore:
        return cls(state_dir / HISTORY_FILE, retention, clock)

    def close(self) -> None:
        self.write_arrivals()
        super().close()

    def reader(self) -> HistoryReader:
        """A second, read-only connection (for a thread worker: never holds up the ledger)."""
        uri = f"file:{quote(str(self.path))}?mode=ro"
        return HistoryReader(sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=10))

    # -- the Ledger protocol --------------------------------------------------------------------

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        """Durable on return (one fsynced transaction): the publisher links the responses only after this."""
        now = self.clock.wall()
        with self._tx(durable=True) as conn:
            for verdict in verdicts:
                response = verdict.response
                source = response.decided_by
                # The person's time counts from when the ask was shown; a rule's from its arrival.
                found = self._open_row(conn, verdict.key)
                row_id, started = found or self._insert_arrival(conn, verdict.key, verdict.parsed, now)
                conn.execute(
                    "UPDATE asks SET decided_at = ?, verdict = ?, decided_by = ?, decider = ?, "
                    "responder_session = ?, decide_ms = ?, outcome = ?, reason = ?, response = ?, "
                    "written = NULL WHERE id = ?",
                    storable(
                        (
                            now,
                            response.state,
                            dumps(decision_source_json(source)) if source is not None else None,
                            describe_decider(source, verdict.outcome),
                            response.responder_session_id,
                            (now - started) * 1000,
                            outcome_kind(verdict.outcome, source),
                            response.denial_reason,
                            verdict.body,
                            row_id,
                        )
                    ),
                )

    def mark_written(self, marks: Sequence[WrittenMark]) -> None:
        """The responses were linked (or found already there): for their children the asks have ended."""
        now = self.clock.wall()
        with self._tx() as conn:
            conn.executemany(
                "UPDATE asks SET written = ?, ended_at = CASE WHEN ? THEN ? ELSE ended_at END "
                "WHERE id = (SELECT id FROM asks WHERE served_session = ? AND request_id = ? "
                "AND response IS NOT NULL ORDER BY id DESC LIMIT 1)",
                [(int(m.written), m.written, now, m.key.session_id, m.request_id) for m in marks],
            )

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, RecordedVerdict]:
        """The verdicts recorded for these requests, by id (ids are unique per ask; the newest wins)."""
        found: dict[str, RecordedVerdict] = {}
        ids = list(dict.fromkeys(request_ids))
        with self._reading():
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ", ".join("?" for _ in chunk)
                for request_id, body, written in self._conn.execute(
                    "SELECT request_id, response, written FROM asks WHERE served_session = ? "
                    f"AND request_id IN ({marks}) AND response IS NOT NULL ORDER BY id",
                    (session_id, *chunk),
                ):
                    found[request_id] = RecordedVerdict(body=body, written=bool(written))
        return found

    # -- the observer ---------------------------------------------------------------------------

    def observe(self, event: ServeEvent) -> None:
        """Subscribe this to `ServingCore.subscribe`: every request file's fate lands in a row."""
        if event.kind == "arrived":
            self._arrived(event)
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
                (session_id, *_OPEN),
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

    def _arrived(self, event: ServeEvent) -> None:
        """Queued: a burst's arrivals are written together (see the module docstring)."""
        assert event.parsed is not None
        with self._queue_lock:
            self._arrivals.append(event)
            first = len(self._arrivals) == 1
        if not first:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_arrivals()
            return
        loop.call_soon(loop.run_in_executor, None, self._write_arrivals_soon)

    def _write_arrivals_soon(self) -> None:
        try:
            self.write_arrivals()
        except Exception as exc:  # kept queued: the next transaction writes them
            log.error("writing arrivals to the history failed: %s", exc)

    def write_arrivals(self) -> None:
        """Write the arrivals not written yet, in one transaction."""
        with self._lock:
            if self._arrivals:
                with self._tx():
                    pass

    def _write_arrivals(self, conn: sqlite3.Connection, pending: Sequence[ServeEvent]) -> None:
        for event in pending:
            assert event.parsed is not None
            found = self._open_row(conn, event.key)
            if found is None:
                self._insert_arrival(conn, event.key, event.parsed, event.at, event.raw)
            else:
                # Served again after a restart: the same ask, so the same row.
                conn.execute("UPDATE asks SET outcome = 'pending' WHERE id = ?", (found[0],))

    def _withdrawn(self, event: ServeEvent) -> None:
        with self._tx() as conn:
            found = self._open_row(conn, event.key)
            if found is None:
                if event.parsed is None:
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
            found = self._open_row(conn, key)
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

    # -- rows -----------------------------------------------------------------------------------

    def _open_row(self, conn: sqlite3.Connection, key: AskKey) -> tuple[int, float] | None:
        """The open row of this request file: its id and when it was shown (else arrived)."""
        found = conn.execute(
            "SELECT id, COALESCE(shown_at, arrived_at) FROM asks WHERE served_session = ? "
            "AND request_name = ? AND verdict IS NULL AND outcome IN (?, ?) AND ended_at IS NULL "
            "ORDER BY id DESC LIMIT 1",
            (key.session_id, key.name, *_OPEN),
        ).fetchone()
        return None if found is None else (found[0], found[1])

    def _insert_arrival(
        self,
        conn: sqlite3.Connection,
        key: AskKey,
        parsed: ParsedRequest | None,
        at: float,
        raw: bytes | None = None,
    ) -> tuple[int, float]:
        values: dict[str, object] = {
            "served_session": key.session_id,
            "request_name": key.name,
            "arrived_at": at,
            "outcome": "pending",
            "raw": raw if raw is not None else (parsed.raw if parsed else None),
        }
        if parsed is not None:
            values.update(facts_columns(parsed))
        row_id = self._insert(conn, values)
        return row_id, at

    def _insert(self, conn: sqlite3.Connection, values: dict[str, object]) -> int:
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cursor = conn.execute(f"INSERT INTO asks ({names}) VALUES ({marks})", storable(values.values()))
        self._since_prune += 1
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def insert_rows(self, rows: Sequence[dict[str, object]]) -> int:
        """Bulk insert (imports, benchmarks); rows whose `import_key` is already stored are skipped."""
        added = 0
        with self._tx() as conn:
            for values in rows:
                names = ", ".join(values)
                marks = ", ".join("?" for _ in values)
                cursor = conn.execute(
                    f"INSERT OR IGNORE INTO asks ({names}) VALUES ({marks})",
                    tuple(values.values()),
                )
                added += cursor.rowcount
                self._since_prune += cursor.rowcount
        return added

    # -- retention ------------------------------------------------------------------------------

    def prune(self, now: float | None = None) -> int:
        """Apply the retention limits; a verdict not yet known written is never pruned."""
        keep = "NOT (response IS NOT NULL AND written IS NULL)"
        removed = 0
        self._since_prune = 0
        with self._tx() as conn:
            if self.retention.max_age_s is not None:
                cutoff = (self.clock.wall() if now is None else now) - self.retention.max_age_s
                removed += conn.execute(
                    f"DELETE FROM asks WHERE arrived_at < ? AND {keep}",
                    (cutoff,),
                ).rowcount
            if self.retention.max_rows is not None:
                removed += conn.execute(
                    f"DELETE FROM asks WHERE id IN (SELECT id FROM asks ORDER BY arrived_at DESC, id DESC "
                    f"LIMIT -1 OFFSET ?) AND {keep}",
                    (self.retention.max_rows,),
                ).rowcount
        return removed

    def _maybe_prune(self) -> None:
        if self._since_prune >= self.retention.every:
            self.prune()

    # -- plumbing -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock:
            if self._arrivals:
                self.write_arrivals()
            yield

    @contextlib.contextmanager
    def _tx(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """A write transaction; queued arrivals are written first, in it (every row it looks for exists)."""
        with self._lock:
            conn = self._conn
            if durable:
                conn.execute("PRAGMA synchronous=FULL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                with self._queue_lock:
                    pending, self._arrivals = self._arrivals, []
                try:
                    self._write_arrivals(conn, pending)
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    with self._queue_lock:
                        self._arrivals = pending + self._arrivals  # written by the next transaction
                    raise
                conn.execute("COMMIT")
            finally:
                if durable:
                    conn.execute("PRAGMA synchronous=NORMAL")
        self._maybe_prune()


