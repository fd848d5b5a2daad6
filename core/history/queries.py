"""Queries over the history: filters (the review screen's box), summaries, and the reader that runs them
on one connection (the store's own, or a read-only one for a thread worker); the statements are the
asks table's (`core.history.table`)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from core.history.rows import APPROVED_STATES, DENIED_STATES, HistoryRow
from core.history.table import AsksTable
from core.serving.verdicts import VerdictRow


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


#: What `--verdict` and `verdict:` accept: approved / denied (with their variants), an exact state,
#: or an outcome (how an ask ended, or who decided it).
VERDICT_TERMS = (
    "approved", "approved_for_session", "denied", "denied_with_reason",
    "pending", "user", "user_grant", "session_grant", "rule", "chain", "courier", "fail-safe", "over-limit",
    "left", "withdrawn", "quarantined", "forged",
)


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
    """Queries over one connection to the history file, each under a guard: the reader's own lock, or
    on the writer's connection the writer's (`HistoryWriter.reading`: its lock, and what is queued
    written first). WAL lets a connection of its own read while the writer writes."""

    def __init__(
        self, conn: sqlite3.Connection, guard: Callable[[], AbstractContextManager[object]] | None = None
    ) -> None:
        self._conn = conn
        self._table = AsksTable(conn)
        self._lock = threading.RLock()
        self._reading = guard or (lambda: self._lock)

    @classmethod
    def read_only(cls, path: Path) -> HistoryReader:
        """A connection of its own that cannot write (for a thread worker: never holds up the ledger)."""
        uri = f"file:{quote(str(path))}?mode=ro"
        return cls(sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=10))

    def close(self) -> None:
        """Close a connection of its own (`read_only`); the writer closes its connection itself."""
        with self._lock:
            self._conn.close()

    # -- reading --------------------------------------------------------------------------------

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, VerdictRow]:
        """The verdicts recorded for these requests, by id (ids are unique per ask; the newest wins)."""
        with self._reading():
            return self._table.recorded_verdicts(session_id, request_ids)

    def ids(self, where: HistoryFilter | None = None, limit: int | None = None) -> list[int]:
        """Matching row ids, newest first: the review list pages through these."""
        clause, params = (where or HistoryFilter()).where()
        with self._reading():
            return self._table.ids(clause, params, limit)

    def rows(self, ids: Sequence[int]) -> list[HistoryRow]:
        """The rows with these ids, in the order given."""
        if not ids:
            return []
        with self._reading():
            found = self._table.rows(ids)
        return [found[i] for i in ids if i in found]

    def query(self, where: HistoryFilter | None = None, limit: int | None = None) -> list[HistoryRow]:
        """The newest `limit` matching rows, newest first."""
        return self.rows(self.ids(where, limit))

    def summary(self, where: HistoryFilter | None = None) -> Summary:
        """Two scans of the matching rows: per-agent counts (totals summed from them), then the median."""
        clause, params = (where or HistoryFilter()).where()
        with self._reading():
            groups = self._table.summary_groups(clause, params)
            people = sum(g[5] for g in groups)
            median = self._table.person_ms_at(clause, params, (people - 1) // 2) if people else None
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
            return self._table.distinct(column)
