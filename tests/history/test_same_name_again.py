"""A child that asks again under the same request name (another id) after its first ask's verdict was
refused by the history (its fail-safe close queued): every request keeps a row of its own, each
verdict lands on its own request's row, and the ledger finds it by its id, whichever transaction
writes the queue and in whatever order (review8). Queued arrivals used to be written before queued
closes, so the new request was merged into the old open row that the close then ended; and a verdict
claimed the first of two queued arrivals, taking the other request's id, and dropped the second."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.seams import Seams
from core.serving.verdicts import VerdictRecord
from core.testing import Breakable, ManualClock
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response

S = "019ff969-c34c-70be-9034-fae19c852932"
SAME = AskKey(S, "same.json")


def _arrival(request_id: str, at: float, key: AskKey = SAME) -> ServeEvent:
    raw = json.dumps({"id": request_id, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
                      "requesterAgentName": "Explore", "message": f"run {request_id}", "surface": "bash",
                      "value": request_id}).encode()
    return ServeEvent("arrived", key, at, parsed=parse_request(raw), raw=raw)


def _fail_safe(first: ServeEvent, at: float) -> ServeEvent:
    denial = deny(responder=S, at_ms=5, decided_by=None, reason="the history could not record the verdict")
    return ServeEvent("answered", SAME, at, first.parsed, denial, "fail-safe",
                      "the history could not record the verdict")


def _rows(path: Path) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT request_id, json_extract(raw, '$.id'), outcome, shown_at IS NOT NULL "
                            "FROM asks WHERE request_name = 'same.json' ORDER BY id").fetchall()


@pytest.mark.parametrize("written_by", ["a note on another request", "the whole queue", "its own note"])
async def test_a_new_request_behind_a_queued_fail_safe_close_gets_a_row_of_its_own(
    tmp_path: Path, written_by: str,
) -> None:
    store = HistoryStore(tmp_path / "history.sqlite3", seams=Seams(clock=ManualClock(wall=10.0)))
    try:
        first = _arrival("r1", 10.0)
        store.observe(first)  # queued (a loop runs)
        store.write_arrivals()  # r1's row, pending
        store.observe(_fail_safe(first, 10.2))  # its verdict refused: the close queued
        if written_by == "a note on another request":
            other = _arrival("x", 10.3, AskKey(S, "x.json"))
            store.observe(other)
            store.observe(ServeEvent("withdrawn", other.key, 10.4))  # writes x's events alone
        store.observe(_arrival("r2", 10.5))  # the child asks again under the same name
        if written_by == "the whole queue":
            store.write_arrivals()
        store.mark_shown(SAME, 10.6)  # the person is shown r2: writes what is queued under its name
        assert _rows(store.path) == [("r1", "r1", "fail-safe", 0), ("r2", "r2", "pending", 1)]
    finally:
        store.close()


async def test_a_verdict_joins_its_own_requests_arrival_and_never_another_of_the_same_name(
    tmp_path: Path,
) -> None:
    fault = Breakable()
    store = HistoryStore(tmp_path / "history.sqlite3", seams=Seams(clock=ManualClock(wall=10.0), fault=fault))
    try:
        first = _arrival("r1", 10.0)
        assert first.parsed is not None
        store.observe(first)
        store.expect(SAME)  # its verdict is on its way: the arrival stays queued for it
        approved = approve(responder=S, at_ms=1, decided_by=None)
        body = encode_response(approved)
        fault.broken = True  # a full disk: the verdict's transaction is refused, r1's arrival put back
        with pytest.raises(sqlite3.OperationalError):
            store.record_verdicts([VerdictRecord(SAME, first.parsed, approved, body, "user")])
        fault.broken = False
        store.observe(_fail_safe(first, 10.2))
        again = _arrival("r2", 10.5)
        assert again.parsed is not None
        store.observe(again)
        store.record_verdicts([VerdictRecord(SAME, again.parsed, approved, body, "user")])
        assert set(store.recorded_verdicts(S, ["r1", "r2"])) == {"r1", "r2"}
        assert _rows(store.path) == [("r1", "r1", "fail-safe", 0), ("r2", "r2", "user", 0)]
    finally:
        store.close()
