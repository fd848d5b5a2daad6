"""One SQLite row per ask served: the ledger the serving core writes before answering, and its reader.

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
import base64
import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import quote

from core.asks import AskKey
from core.clock import SYSTEM_CLOCK, Clock
from core.history.schema import migrate
from core.principal import agent_mismatch
from core.publishing import RecordedVerdict, VerdictRecord, WrittenMark
from core.serving import ServeEvent
from core.tree import FILE_MODE, Anchor
from core.wire import (
    AuthorizerDecision,
    DecisionSource,
    ForwardedDecision,
    GateErrorDecision,
    ParsedRequest,
    RequestRejected,
    RuleDecision,
    SessionApprovalDecision,
    UnavailableDecision,
    UserDecision,
    YoloDecision,
    decision_source_json,
    parse_request,
)

HISTORY_FILE = "history.sqlite3"
log = logging.getLogger("pi_authorizer.history")

APPROVED_STATES = ("approved", "approved_for_session")
DENIED_STATES = ("denied", "denied_with_reason")
_OPEN = ("pending", "left")


@dataclass(frozen=True)
class Retention:
    """How long rows are kept. `None` disables a limit; pruning runs every `every` new rows."""

    max_age_s: float | None = 180 * 86400
    max_rows: int | None = 200_000
    every: int = 500


@dataclass(frozen=True)
class HistoryRow:
    """A stored ask; field names are the column names (and the `history --json` keys).

    `outcome` is `pending` until the ask ends; `ended_at` is when it stopped being open for the
    child: its response linked, or withdrawn, or quarantined.
    """

    id: int
    served_session: str
    request_name: str
    request_id: str | None
    raw: bytes | None
    agent: str | None
    requester_session: str | None
    surface: str | None
    value: str | None
    message: str | None
    facts: str | None
    created_at: float | None
    arrived_at: float
    shown_at: float | None
    decided_at: float | None
    verdict: str | None
    decided_by: str | None
    decider: str | None
    responder_session: str | None
    decide_ms: float | None
    outcome: str
    reason: str | None
    response: bytes | None
    written: int | None
    ended_at: float | None
    source: str
    import_key: str | None

    def facts_json(self) -> dict[str, Any]:
        facts = _loads(self.facts)
        return facts if isinstance(facts, dict) else {}

    def requester_agent(self) -> str | None:
        """The child's `requesterAgentName` (`agent` is `principal.agentName`, which the rules use)."""
        name = self.facts_json().get("requesterAgentName")
        return name if isinstance(name, str) else None

    def agent_mismatch(self) -> str | None:
        """The warning when the requester and principal agent names differ, else None."""
        requester = self.requester_agent()
        return None if requester is None else agent_mismatch(requester, self.agent or "")

    def decided_by_json(self) -> dict[str, Any] | None:
        source = _loads(self.decided_by)
        return source if isinstance(source, dict) else None

    def to_json(self) -> dict[str, Any]:
        """Every column; BLOBs as base64, JSON columns as nested values, and one time unit:
        milliseconds (instants since the epoch, as the child's `createdAt`; `decide_ms` a span)."""
        out: dict[str, Any] = {}
        for name in COLUMNS:
            value = getattr(self, name)
            if isinstance(value, bytes):
                value = base64.b64encode(value).decode("ascii")
            elif name in ("facts", "decided_by"):
                value = _loads(value)
            elif name in _SECONDS_COLUMNS and value is not None:
                value = round(value * 1000, 3)
            out[name] = value
        return out


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(HistoryRow))
#: Instants stored in seconds (the child's `created_at` is already milliseconds).
_SECONDS_COLUMNS = frozenset({"arrived_at", "shown_at", "decided_at", "ended_at"})
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM asks"


@dataclass(frozen=True)
class HistoryFilter:
    """Which rows to show. `session` matches the served or the requesting session; `text` is a
    case-insensitive substring of agent, surface, value, decider, reason or request id (not of the
    message, which restates the value and would make every search scan much more text)."""

    agent: str | None = None
    session: str | None = None
    surface: str | None = None
    verdict: str | None = None
    text: str | None = None
    since: float | None = None
    source: str | None = None

    @classmethod
    def parse(cls, text: str) -> HistoryFilter:
        """The review screen's filter box: `agent:` `session:` `surface:` `verdict:` terms, rest free text."""
        terms: dict[str, str] = {}
        words = []
        for word in text.split():
            name, colon, value = word.partition(":")
            if colon and value and name in {"agent", "session", "surface", "verdict", "source"}:
                terms[name] = value
            else:
                words.append(word)
        return cls(
            agent=terms.get("agent"),
            session=terms.get("session"),
            surface=terms.get("surface"),
            verdict=terms.get("verdict"),
            source=terms.get("source"),
            text=" ".join(words) or None,
        )

    def where(self) -> tuple[str, list[object]]:
        clauses: list[str] = []
        params: list[object] = []
        if self.agent:
            clauses.append("agent = ?")
            params.append(self.agent)
        if self.session:
            clauses.append("(served_session = ? OR requester_session = ?)")
            params += [self.session, self.session]
        if self.surface:
            clauses.append("surface = ?")
            params.append(self.surface)
        if self.verdict:
            clause, values = _verdict_clause(self.verdict)
            clauses.append(clause)
            params += values
        if self.text:
            needle = f"%{self.text.replace('^', '^^').replace('%', '^%').replace('_', '^_')}%"
            searched = ("agent", "surface", "value", "decider", "reason", "request_id")
            clauses.append("(" + " OR ".join(f"{c} LIKE ? ESCAPE '^'" for c in searched) + ")")
            params += [needle] * len(searched)
        if self.since is not None:
            clauses.append("arrived_at >= ?")
            params.append(self.since)
        if self.source:
            clauses.append("source = ?")
            params.append(self.source)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _verdict_clause(verdict: str) -> tuple[str, list[object]]:
    """`approved`/`denied` cover their variants; an outcome name (`withdrawn`...) matches outcomes."""
    if verdict == "approved":
        return "verdict IN (?, ?)", list(APPROVED_STATES)
    if verdict == "denied":
        return "verdict IN (?, ?)", list(DENIED_STATES)
    return "(verdict = ? OR (verdict IS NULL AND outcome = ?))", [verdict, verdict]


@dataclass(frozen=True)
class Summary:
    """What the review screen's summary line says about a filtered set."""

    total: int
    per_agent: tuple[tuple[str, int], ...]
    decided: int
    approved: int
    withdrawn: int
    median_person_ms: float | None

    @property
    def share_approved(self) -> float | None:
        return self.approved / self.decided if self.decided else None


class HistoryReader:
    """Queries over the history file; a `HistoryStore` is one, and `reader()` opens another
    connection for work off the serving thread (WAL lets it read while the store writes)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock:
            yield

    # -- reading --------------------------------------------------------------------------------

    def ids(self, where: HistoryFilter | None = None, limit: int | None = None) -> list[int]:
        """Matching row ids, newest first: the review list pages through these."""
        clause, params = (where or HistoryFilter()).where()
        sql = f"SELECT id FROM asks{clause} ORDER BY arrived_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._reading():
            return [r[0] for r in self._conn.execute(sql, params)]

    def rows(self, ids: Sequence[int]) -> list[HistoryRow]:
        """The rows with these ids, in the order given."""
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        with self._reading():
            found = {
                r[0]: HistoryRow(*r)
                for r in self._conn.execute(f"{_SELECT} WHERE id IN ({marks})", tuple(ids))
            }
        return [found[i] for i in ids if i in found]

    def query(self, where: HistoryFilter | None = None, limit: int | None = None) -> list[HistoryRow]:
        """The newest `limit` matching rows, newest first."""
        return self.rows(self.ids(where, limit))

    def summary(self, where: HistoryFilter | None = None) -> Summary:
        """Two scans of the matching rows: per-agent counts (totals summed from them), then the median."""
        clause, params = (where or HistoryFilter()).where()
        with self._reading():
            groups = self._conn.execute(
                "SELECT agent, COUNT(*), COUNT(verdict), "
                "COUNT(CASE WHEN verdict IN ('approved', 'approved_for_session') THEN 1 END), "
                "COUNT(CASE WHEN outcome = 'withdrawn' THEN 1 END), "
                "COUNT(CASE WHEN outcome IN ('user', 'user_grant') AND decide_ms IS NOT NULL THEN 1 END) "
                f"FROM asks{clause} GROUP BY agent",
                params,
            ).fetchall()
            people = sum(g[5] for g in groups)
            median = None
            if people:
                joiner = " AND " if clause else " WHERE "
                median = self._conn.execute(
                    f"SELECT decide_ms FROM asks{clause}{joiner}outcome IN ('user', 'user_grant') "
                    "AND decide_ms IS NOT NULL "
                    "ORDER BY decide_ms LIMIT 1 OFFSET ?",
                    [*params, (people - 1) // 2],
                ).fetchone()[0]
        per_agent = tuple(sorted(((g[0] or "?", g[1]) for g in groups), key=lambda p: (-p[1], p[0])))
        return Summary(
            total=sum(g[1] for g in groups),
            per_agent=per_agent,
            decided=sum(g[2] for g in groups),
            approved=sum(g[3] for g in groups),
            withdrawn=sum(g[4] for g in groups),
            median_person_ms=median,
        )

    def distinct(self, column: str) -> list[str]:
        """Values seen in one filterable column (for filter hints and suggestion checks)."""
        if column not in {"agent", "surface", "served_session", "verdict", "outcome"}:
            raise ValueError(f"not a filterable column: {column}")
        with self._reading():
            sql = f"SELECT DISTINCT {column} FROM asks WHERE {column} IS NOT NULL ORDER BY 1"
            return [r[0] for r in self._conn.execute(sql)]


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
                    _storable(
                        (
                            now,
                            response.state,
                            _dumps(decision_source_json(source)) if source is not None else None,
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
                conn.execute(f"UPDATE asks SET {assignment} WHERE id = ?", _storable((*params, found[0])))

    def _quarantined(self, event: ServeEvent) -> None:
        parsed: ParsedRequest | None = None
        if event.raw is not None:
            with contextlib.suppress(RequestRejected):
                parsed = parse_request(event.raw)
        with self._tx() as conn:
            row_id, _ = self._insert_arrival(conn, event.key, parsed, event.at, event.raw)
            conn.execute(
                "UPDATE asks SET outcome = ?, reason = ?, ended_at = ? WHERE id = ?",
                _storable((event.kind, event.reason, event.at, row_id)),
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
        cursor = conn.execute(f"INSERT INTO asks ({names}) VALUES ({marks})", _storable(values.values()))
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


def facts_columns(parsed: ParsedRequest) -> dict[str, object]:
    """The parsed facts as columns: child-fixed facts (what the rules judged) win over display fields."""
    request = parsed.request
    intent = parsed.access_intent
    surface = intent.surface if intent else request.surface
    value = intent.match_values[0] if intent and intent.match_values else request.value
    facts: dict[str, Any] = {
        "accessIntent": intent.model_dump(by_alias=True, mode="json") if intent else None,
        "sessionApproval": (
            [g.model_dump(mode="json") for g in request.session_approval.grants]
            if request.session_approval
            else None
        ),
        "source": request.source,
        "displaySurface": request.surface,
        "displayValue": request.value,
        "dropped": parsed.dropped or None,
        "requesterAgentName": request.requester_agent_name,
    }
    return {
        "request_id": request.id,
        "agent": intent.principal.agent_name if intent else request.requester_agent_name,
        "requester_session": request.requester_session_id,
        "surface": surface,
        "value": value,
        "message": request.message,
        "facts": _dumps(facts),
        "created_at": request.created_at,
    }


def outcome_kind(outcome: str, source: DecisionSource | None) -> str:
    """The core's outcome, with a rule decision that came from a session grant named as such."""
    granted = isinstance(source, RuleDecision) and source.origin == "session"
    if outcome == "rule" and (granted or isinstance(source, SessionApprovalDecision)):
        return "session_grant"
    return outcome


def describe_decider(source: DecisionSource | None, outcome: str) -> str:
    """Who or what decided, in words (the `decidedBy` JSON is stored beside it)."""
    if isinstance(source, UserDecision):
        scope = {"user_grant": ", recorded a whole-session grant"}.get(outcome, "")
        return f"person ({source.via}){scope}"
    if isinstance(source, SessionApprovalDecision):
        by = "the grant just recorded: " if outcome == "session_grant" else ""
        return f"{by}session grant {source.surface} {source.pattern!r}"
    if isinstance(source, RuleDecision):
        return f"rule {source.surface} {source.pattern!r} ({source.origin or '?'})"
    if isinstance(source, AuthorizerDecision):
        return f"chain link {source.name}"
    if isinstance(source, UnavailableDecision):
        return f"fail-safe: {source.reason}"
    if isinstance(source, GateErrorDecision):
        return f"gate error: {source.reason}"
    if isinstance(source, YoloDecision):
        return "yolo"
    if isinstance(source, ForwardedDecision):
        inner = describe_decider(source.decision, outcome)
        return f"forwarded by {source.responder_session_id or '?'}: {inner}"
    if source is None:
        return outcome
    return source.kind


def _storable(params: Iterable[object]) -> tuple[object, ...]:
    """SQL parameters SQLite can take: a lone surrogate (the real child writes one when its text
    truncation splits a pair) is kept as its `\\udXXX` escape, which in a JSON column is exactly the
    JSON escape of that character. Everything else is bound unchanged."""
    return tuple(_text(p) if isinstance(p, str) else p for p in params)


def _text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
