"""The open rows' own index (schema version 3): a history of version 2 with rows is brought forward
keeping them, its open rows still found (on a big history each statement that looks for a request
file's row, a request id's verdict or the open rows goes through an index: `test_request_ids.py`)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from core.history import VERSION, HistoryStore, migrate
from core.seams import Seams
from core.serving.verdicts import VerdictRecord
from core.testing import ManualClock
from core.vocabulary.asks import AskKey
from core.wire.decisions import RuleDecision
from core.wire.reader import parse_request
from core.wire.response import approve, encode_response

S = "019ff969-c34c-70be-9034-fae19c852932"


def raw_request(name: str) -> bytes:
    return json.dumps({"id": name, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
                       "requesterAgentName": "Explore", "message": f"run {name}", "surface": "bash",
                       "value": name}).encode()


def test_a_version_2_history_with_open_rows_is_brought_forward(tmp_path: Path) -> None:
    """Rows written before the index (an ask at a person, one decided, one withdrawn) are kept, and
    the open one is still the row its verdict lands in."""
    path = tmp_path / "history.sqlite3"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        assert migrate(conn, target=2) == 2
        conn.executemany(
            "INSERT INTO asks (served_session, request_name, request_id, arrived_at, outcome, verdict, "
            "ended_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(S, "open.json", "open", 1.0, "pending", None, None),
             (S, "done.json", "done", 2.0, "rule", "approved", 3.0),
             (S, "gone.json", "gone", 4.0, "withdrawn", None, 5.0)])
    store = HistoryStore(path, seams=Seams(clock=ManualClock(wall=10.0)))
    response = approve(responder=S, at_ms=0, decided_by=RuleDecision(surface="bash", pattern="*", origin="g"))
    raw = raw_request("open")
    store.record_verdicts([VerdictRecord(AskKey(S, "open.json"), parse_request(raw), response,
                                         encode_response(response), "rule", arrived=9.0, raw=raw)])
    store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == VERSION
        rows = conn.execute("SELECT id, request_name, outcome, verdict FROM asks ORDER BY id").fetchall()
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert rows == [(1, "open.json", "rule", "approved"), (2, "done.json", "rule", "approved"),
                    (3, "gone.json", "withdrawn", None)]
    assert {"asks_open", "asks_arrived", "asks_agent"} <= indexes
