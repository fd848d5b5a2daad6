"""A spool line this program never writes is skipped, not queued: an arrival without its request, a
fail-safe close without its response, a time that is no time (NaN). Queued, such an event failed every
transaction that wrote the whole queue (an `AssertionError` in the table, or SQLite's NOT NULL), so
every start's reconcile raised (an `AssertionError` is not the `HistoryFailed` a start handles: `serve`
stopped), and the event was spooled again at every exit. Review of ea45d2e (older than it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.history import HistoryStore, spool
from tests.history.support import S, b64, spool_with, wire_request

HOSTILE: dict[str, dict[str, object]] = {
    "an arrival without its request": {"kind": "arrived", "request": None, "raw": None, "response": None},
    "a close without its response": {"kind": "answered", "request": b64(wire_request("bad")),
                                     "response": None},
    "a time that is no time": {"kind": "arrived", "request": b64(wire_request("bad")), "response": None,
                               "at": float("nan")},
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_a_line_the_queue_never_holds_is_skipped_and_the_history_goes_on(
    tmp_path: Path, hostile: str
) -> None:
    history = tmp_path / "history.sqlite3"
    line = {"session": S, "name": "bad.json", "at": 1.0, "outcome": "fail-safe", "reason": "why",
            **HOSTILE[hostile]}
    (tmp_path / spool.spool_name(history)).write_bytes(
        spool_with(line))
    store = HistoryStore(history)
    try:
        assert store.reconcile_open(S, set()) == 0  # raised at every start
        assert [(row.request_id, row.outcome) for row in store.query()] == [("good", "fail-safe")]
    finally:
        store.close()
    assert not (tmp_path / spool.spool_name(history)).exists()  # not spooled again
