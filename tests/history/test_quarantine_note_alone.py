"""A note on one request (a file set aside, a withdrawal) commits its own row, and before it only what
is queued under the same name: the backlog of other queued arrivals stays queued for its own
transaction. Each note wrote the
whole backlog first; on a full disk every one of thousands of notes rewrote thousands of rows, was
refused at COMMIT, and put them back, and a stop waited for it (campaign6, run 621). The rows read
from the file by a connection of their own, as any reader of the history file would."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from core.history import HistoryStore
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from tests.helpers import request_body

SESSION = "noted-alone"
NOTED = [("q.json", "pending"), ("q.json", "quarantined"), ("junk.json", "quarantined"),
         ("w.json", "withdrawn")]


def _arrival(name: str) -> ServeEvent:
    raw = json.dumps(request_body(name.removesuffix(".json"), SESSION)).encode()
    return ServeEvent("arrived", AskKey(SESSION, name), time.time(), parse_request(raw), raw=raw)


def _rows(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return list(conn.execute("SELECT request_name, outcome FROM asks ORDER BY id"))


async def test_a_set_aside_note_writes_its_own_rows_and_leaves_the_backlog_queued(tmp_path: Path) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    try:
        backlog = [f"b{i}.json" for i in range(50)]
        for name in [*backlog[:25], "q.json", "w.json", *backlog[25:]]:
            store.expect(AskKey(SESSION, name))  # their verdicts are on their way: they stay queued
            store.observe(_arrival(name))
        now = time.time()
        quarantined = ServeEvent("quarantined", AskKey(SESSION, "q.json"), now, reason="changed while served",
                                 raw=b"{}")
        store.record_quarantined(quarantined)  # the quarantine's own thread, before the file moves
        store.observe(ServeEvent("quarantined", AskKey(SESSION, "junk.json"), now, reason="not JSON",
                                 raw=b"\xff"))
        store.observe(quarantined)  # observed after the move: no second row
        store.observe(ServeEvent("withdrawn", AskKey(SESSION, "w.json"), now))  # its own row, found
        assert _rows(store.path) == [*NOTED]
    finally:
        store.close()  # what is still queued is written now
    rows = _rows(store.path)
    assert rows[:4] == NOTED
    assert sorted(rows[4:]) == sorted((name, "pending") for name in backlog)
