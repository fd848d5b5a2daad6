"""The open row of a request file: the row of an ask that has not ended (no verdict, not withdrawn), and
the row of an ask decided whose response was never written (it has not ended for its child either).

Every later fact about an ask (its verdict, shown, left, withdrawn) lands in that row; a request served
again after a restart reopens it instead of adding a second one.
"""

# SQL text here is assembled from constant fragments only; every value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from core.history.rows import storable
from core.vocabulary.asks import AskKey

# The outcomes of a row whose ask has not ended.
OPEN = ("pending", "left")


def open_row(conn: sqlite3.Connection, key: AskKey) -> tuple[int, float] | None:
    """The open row of this request file: its id and when it was shown (else arrived)."""
    found = conn.execute(
        "SELECT id, COALESCE(shown_at, arrived_at) FROM asks WHERE served_session = ? "
        "AND request_name = ? AND verdict IS NULL AND outcome IN (?, ?) AND ended_at IS NULL "
        "ORDER BY id DESC LIMIT 1",
        (key.session_id, key.name, *OPEN),
    ).fetchone()
    return None if found is None else (found[0], found[1])


def open_rows(conn: sqlite3.Connection, keys: Sequence[AskKey]) -> dict[AskKey, tuple[int, float]]:
    """`open_row` for many request files at once (a burst's arrivals or verdicts), by key."""
    names: dict[str, dict[str, None]] = {}
    for key in keys:
        names.setdefault(key.session_id, {})[key.name] = None
    found: dict[AskKey, tuple[int, float]] = {}
    for session_id, unique in names.items():
        listed = list(unique)
        for start in range(0, len(listed), 500):
            chunk = listed[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            for row_id, name, started in conn.execute(
                "SELECT id, request_name, COALESCE(shown_at, arrived_at) FROM asks "
                f"WHERE served_session = ? AND request_name IN ({marks}) AND verdict IS NULL "
                "AND outcome IN (?, ?) AND ended_at IS NULL ORDER BY id",
                storable((session_id, *chunk, *OPEN)),
            ):
                found[AskKey(session_id, name)] = (row_id, started)  # the newest wins
    return found


def unwritten_row(conn: sqlite3.Connection, key: AskKey) -> tuple[int, float] | None:
    """The row of an ask whose verdict was recorded but whose response was never written, and which has
    not ended: its child is still unanswered (the write failed). A later verdict for the same request
    file (decided again) or its withdrawal lands in this row, so one ask keeps one row."""
    found = conn.execute(
        "SELECT id, COALESCE(shown_at, arrived_at) FROM asks WHERE served_session = ? AND request_name = ? "
        "AND response IS NOT NULL AND written IS NULL AND ended_at IS NULL ORDER BY id DESC LIMIT 1",
        storable((key.session_id, key.name)),
    ).fetchone()
    return None if found is None else (found[0], found[1])


def unnoted_rows(conn: sqlite3.Connection, session_id: str) -> list[tuple[int, str, str | None, bytes]]:
    """The rows of a session whose verdict was recorded and never noted written, still open: (id,
    request file name, request id, the recorded bytes)."""
    return [
        (row_id, name, request_id, bytes(body))
        for row_id, name, request_id, body in conn.execute(
            "SELECT id, request_name, request_id, response FROM asks WHERE served_session = ? "
            "AND response IS NOT NULL AND written IS NULL AND ended_at IS NULL",
            storable((session_id,)),
        )
    ]


def end_unanswered(conn: sqlite3.Connection, key: AskKey, at: float, why: str | None = None) -> bool:
    """The child withdrew an ask whose recorded verdict was never written (or another answer won its
    one place, `why`): its row ends `withdrawn`, with no verdict (the child received none) and the
    recorded bytes kept (the ledger's). False when the request file has no such row."""
    found = unwritten_row(conn, key)
    if found is not None:
        reason = why or "decided, but the response could not be written before the child withdrew"
        conn.execute(
            "UPDATE asks SET ended_at = ?, outcome = 'withdrawn', verdict = NULL, reason = ? WHERE id = ?",
            storable((at, reason, found[0])),
        )
    return found is not None


def holds_response(conn: sqlite3.Connection, key: AskKey, body: bytes) -> bool:
    """Whether a row of this request file already holds exactly this response."""
    return conn.execute(
        "SELECT 1 FROM asks WHERE served_session = ? AND request_name = ? AND response = ? LIMIT 1",
        storable((key.session_id, key.name, body)),
    ).fetchone() is not None
