"""A new history file's pages are `PAGE_SIZE`; a file made before keeps its own size, and is read and
written as before."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from core.history import HistoryStore, migrate
from core.history.transactions import PAGE_SIZE
from core.seams import Seams
from core.testing import ManualClock
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request

S = "019ff969-c34c-70be-9034-fae19c852932"
RAW = (b'{"id":"r1","createdAt":1,"requesterSessionId":"child","targetSessionId":"' + S.encode()
       + b'","requesterAgentName":"Explore","message":"run","surface":"bash","value":"ls"}')


def page_size(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        size: int = conn.execute("PRAGMA page_size").fetchone()[0]
    return size


def test_a_new_file_has_the_larger_pages(tmp_path: Path) -> None:
    HistoryStore(tmp_path / "history.sqlite3").close()
    assert page_size(tmp_path / "history.sqlite3") == PAGE_SIZE == 8192


def test_a_file_made_before_keeps_its_pages_and_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        migrate(conn, target=3)
    store = HistoryStore(path, seams=Seams(clock=ManualClock(wall=10.0)))
    store.observe(ServeEvent("arrived", AskKey(S, "r1.json"), 10.0, parsed=parse_request(RAW), raw=RAW))
    assert [row.request_id for row in store.query()] == ["r1"]
    store.close()
    assert page_size(path) == 4096
