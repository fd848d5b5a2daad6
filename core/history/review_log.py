"""Read-only import of pi's own review log, so asks decided in pi's own dialog appear in the history.

The log is JSON Lines written by another program (`docs/design/contract.md` § pi's own logs): every line
may be garbage, cut short or hostile, and is skipped on its own. Each imported row keeps the line's
bytes as its raw request, is marked `source = 'pi-review-log'`, and is keyed by the line's hash, so
importing the same log again adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from core.clock import SYSTEM_CLOCK, Clock
from core.disk.paths import agent_dir
from core.history.store import HistoryStore
from core.history.transactions import Retention

REVIEW_LOG = Path(
    "extensions", "pi-permission-system", "logs", "pi-permission-system-permission-review.jsonl"
)
SOURCE = "pi-review-log"
MAX_LINE_BYTES = 256 * 1024
_DECIDED = {
    "permission_request.approved": True,
    "permission_request.denied": False,
    "forwarded_permission.approved": True,
    "forwarded_permission.denied": False,
}
_WAITING = frozenset({"permission_request.waiting", "forwarded_permission.prompted"})
_STATES = frozenset({"approved", "approved_for_session", "denied", "denied_with_reason"})


@dataclass(frozen=True)
class ImportResult:
    imported: int
    already: int
    skipped: int
    expired: int


def default_review_log() -> Path:
    return agent_dir() / REVIEW_LOG


def import_review_log(
    store: HistoryStore, path: Path, clock: Clock = SYSTEM_CLOCK, retention: Retention | None = None
) -> ImportResult:
    """Add the dialog decisions of `path` to `store`; waiting→decided pairs give the time to decide.
    Decisions older than `retention`'s age (default: the store's) are not imported."""
    waiting: dict[str, float] = {}
    rows: list[dict[str, object]] = []
    skipped = expired = 0
    max_age = (retention or store.retention).max_age_s
    cutoff = clock.wall() - max_age if max_age is not None else None
    with path.open("rb") as handle:
        for line in handle:
            record = _record(line)
            at = _timestamp(record.get("timestamp")) if record else None
            if record is None or at is None:
                skipped += 1
                continue
            event, request_id = record.get("event"), _text(record.get("requestId"))
            if event in _WAITING and request_id:
                waiting[request_id] = at
            elif isinstance(event, str) and event in _DECIDED:
                if cutoff is not None and at < cutoff:
                    expired += 1  # retention would prune it at once, and the next import re-add it
                    continue
                rows.append(
                    _row(line.rstrip(b"\r\n"), record, _DECIDED[event], at, waiting.get(request_id or ""))
                )
    imported = store.insert_rows(rows)
    return ImportResult(imported, len(rows) - imported, skipped, expired)


def _row(
    line: bytes, record: dict[str, Any], approved: bool, at: float, started: float | None
) -> dict[str, object]:
    resolution = record.get("resolution")
    unavailable = resolution == "confirmation_unavailable"
    verdict = resolution if resolution in _STATES else ("approved" if approved else "denied")
    command = _text(record.get("command"))
    request_id = _text(record.get("requestId"))
    return {
        "served_session": "",
        "request_name": request_id or "",
        "request_id": request_id,
        "raw": line,
        "agent": _text(record.get("agentName")),
        "surface": "bash" if command else _text(record.get("toolName")) or _text(record.get("skillName")),
        "value": command
        or _text(record.get("path"))
        or _text(record.get("target"))
        or _text(record.get("toolInputPreview")),
        "message": _text(record.get("message")),
        "arrived_at": started if started is not None else at,
        "decided_at": at,
        "decide_ms": (at - started) * 1000 if started is not None else None,
        "verdict": verdict,
        "decider": "fail-safe: no UI in pi" if unavailable else "person (pi's own dialog)",
        "outcome": "fail-safe" if unavailable else "user",
        "reason": _text(record.get("denialReason")),
        "ended_at": at,
        "source": SOURCE,
        "import_key": hashlib.sha256(line).hexdigest(),
    }


def _record(line: bytes) -> dict[str, Any] | None:
    if len(line) > MAX_LINE_BYTES:
        return None
    try:
        value = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _timestamp(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
