"""Every review of the model judge, in its own SQLite file beside the history (`judge.sqlite3`), and
how the judge measures against the person, per surface.

Its own file: the history ledger's writes (durable before each answer) never wait on the judge's.
The measures join it with the history by request id (`ATTACH`, read-only): for each ask a person
decided, the judge's recommendation (the table's verdict before the caps: what the model and the
table would do if let) against the person's verdict. A failed or skipped review is counted as such,
never as a denial.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.judging.model_judge import JudgeReview

JUDGE_FILE = "judge.sqlite3"
APPROVED = ("approved", "approved_for_session")
DENIED = ("denied", "denied_with_reason")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reviews (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    request_id TEXT,
    served_session TEXT,
    surface TEXT NOT NULL,
    value TEXT,
    mode TEXT NOT NULL,
    recommendation TEXT NOT NULL,
    verdict TEXT NOT NULL,
    routed TEXT NOT NULL,
    why TEXT,
    answers TEXT,
    model_reason TEXT,
    failure TEXT,
    latency_ms REAL
);
CREATE INDEX IF NOT EXISTS reviews_request ON reviews (request_id);
"""
_COLUMNS = ("at", "request_id", "served_session", "surface", "value", "mode", "recommendation", "verdict",
            "routed", "why", "answers", "model_reason", "failure", "latency_ms")


class JudgeRecord:
    """The judge's reviews: appended from a worker thread, read by `history judge` and the app."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        path.chmod(0o600)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # Not the ledger: a review lost to a power cut loses a measure, never an answer; no fsync per ask.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    @classmethod
    def in_state_dir(cls, state_dir: Path) -> JudgeRecord:
        return cls(state_dir / JUDGE_FILE)

    def add(self, review: JudgeReview) -> None:
        row = (review.at, review.request_id, review.served_session, review.surface, review.value, review.mode,
               review.recommendation, review.verdict, review.routed, review.why,
               None if review.answers is None else json.dumps(review.answers), review.model_reason,
               review.failure, review.latency_ms)
        marks = ", ".join("?" for _ in _COLUMNS)
        with self._lock:
            self._conn.execute(f"INSERT INTO reviews ({', '.join(_COLUMNS)}) VALUES ({marks})", row)  # noqa: S608

    def reviews(self, limit: int = 200) -> list[dict[str, Any]]:
        """The latest reviews, newest first."""
        with self._lock:
            cursor = self._conn.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM reviews ORDER BY id DESC LIMIT ?", (limit,))  # noqa: S608
            return [dict(zip(_COLUMNS, row, strict=True)) for row in cursor]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass
class SurfaceMeasure:
    """How the judge did on one surface, against the person where a person decided."""

    surface: str
    reviewed: int = 0
    answered: int = 0
    failed: int = 0
    #: Asks a person decided that the judge recommended allow or deny on.
    compared: int = 0
    agreed: int = 0
    #: The judge would have allowed what the person denied (the dangerous miss), and the reverse.
    allowed_you_denied: list[dict[str, Any]] = field(default_factory=list)
    denied_you_allowed: list[dict[str, Any]] = field(default_factory=list)
    #: The table deferred (no row matched, a contradiction): the person decided alone.
    deferred: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def agreement(self) -> float | None:
        return None if not self.compared else self.agreed / self.compared

    def latency(self) -> tuple[float, float] | None:
        """Median and 95th percentile, in ms, of the answered reviews."""
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        return statistics.median(ordered), p95

    def as_json(self) -> dict[str, Any]:
        latency = self.latency()
        return {"surface": self.surface, "reviewed": self.reviewed, "answered": self.answered,
                "failed": self.failed, "compared": self.compared, "agreed": self.agreed,
                "agreement": self.agreement, "deferred": self.deferred,
                "wouldHaveAllowedWhatYouDenied": self.allowed_you_denied,
                "wouldHaveDeniedWhatYouAllowed": self.denied_you_allowed,
                "latencyMedianMs": None if latency is None else latency[0],
                "latencyP95Ms": None if latency is None else latency[1]}


def measure(judge_file: Path, history_file: Path | None) -> list[SurfaceMeasure]:
    """Per surface: reviews, failures, and, where a person decided the same ask (in the history),
    agreement and the two kinds of disagreement. Read-only on both files."""
    conn = sqlite3.connect(f"file:{judge_file}?mode=ro", uri=True)
    try:
        person: dict[str, str] = {}
        if history_file is not None and history_file.exists():
            conn.execute("ATTACH DATABASE ? AS history", (f"file:{history_file}?mode=ro",))
            for request_id, verdict in conn.execute(
                    "SELECT request_id, verdict FROM history.asks WHERE outcome IN ('user', 'user_grant') "
                    "AND request_id IS NOT NULL ORDER BY id"):
                person[request_id] = verdict
        rows = conn.execute("SELECT at, request_id, surface, value, recommendation, failure, latency_ms, "
                            "why, model_reason FROM reviews ORDER BY id").fetchall()
    finally:
        conn.close()
    measures: dict[str, SurfaceMeasure] = {}
    seen: set[str] = set()
    for at, request_id, surface, value, recommendation, failure, latency, why, said in reversed(rows):
        if request_id is not None and request_id in seen:
            continue  # the latest review of an ask counts (one served again after a restart)
        if request_id is not None:
            seen.add(request_id)
        m = measures.setdefault(surface, SurfaceMeasure(surface))
        m.reviewed += 1
        if failure is not None:
            m.failed += 1
            continue
        m.answered += 1
        if latency is not None:
            m.latencies_ms.append(latency)
        decided = person.get(request_id) if request_id is not None else None
        if decided not in APPROVED + DENIED:
            continue
        if recommendation == "defer":
            m.deferred += 1
            continue
        m.compared += 1
        case = {"at": at, "requestId": request_id, "value": value, "judge": recommendation,
                "person": decided, "why": why, "modelReason": said}
        if (recommendation == "allow") == (decided in APPROVED):
            m.agreed += 1
        elif recommendation == "allow":
            m.allowed_you_denied.append(case)
        else:
            m.denied_you_allowed.append(case)
    return sorted(measures.values(), key=lambda m: m.surface)
