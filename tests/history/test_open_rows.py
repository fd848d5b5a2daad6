"""The open rows' own index (schema version 3): a history of version 2 with rows is brought forward
keeping them, its open rows still found; on a big history each statement that looks for a request
file's row, a request id's verdict or the open rows goes through an index (SQLite's plan says so)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from core.history import VERSION, HistoryStore, migrate
from core.history.table import OPEN, AsksTable
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
        assert conn.execute("PRAGMA user_version").fetchone()[0] == VERSION == 3
        rows = conn.execute("SELECT id, request_name, outcome, verdict FROM asks ORDER BY id").fetchall()
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert rows == [(1, "open.json", "rule", "approved"), (2, "done.json", "rule", "approved"),
                    (3, "gone.json", "withdrawn", None)]
    assert {"asks_open", "asks_key", "asks_request", "asks_arrived", "asks_agent"} <= indexes


def plan(conn: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> str:
    return " | ".join(detail for *_, detail in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))


def test_the_lookups_of_a_big_history_go_through_indexes(tmp_path: Path) -> None:
    """100,000 rows (a few of them open): the statements of a burst's record, its marks and the
    intake's lookup search an index, never scan the table."""
    path = tmp_path / "history.sqlite3"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        migrate(conn)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO asks (served_session, request_name, request_id, arrived_at, outcome, verdict, "
            "response, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ((S if n % 3 else "other", f"r{n}.json", f"r{n}", float(n), *(
                ("pending", None, None, None) if n % 1000 == 0 else ("rule", "approved", b"{}", float(n))))
             for n in range(100_000)))
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        names = ("r1.json", "r2.json", "r1000.json")
        statements = {
            "any open": ("SELECT 1 FROM asks INDEXED BY asks_open WHERE served_session = ? "
                         "AND verdict IS NULL AND ended_at IS NULL LIMIT 1", (S,)),
            "open rows": ("SELECT id, request_name, COALESCE(shown_at, arrived_at) FROM asks WHERE "
                          "served_session = ? AND request_name IN (?, ?, ?) AND verdict IS NULL AND "
                          "outcome IN (?, ?) AND ended_at IS NULL ORDER BY id", (S, *names, *OPEN)),
            "open row": ("SELECT id, COALESCE(shown_at, arrived_at) FROM asks WHERE served_session = ? "
                         "AND request_name = ? AND verdict IS NULL AND outcome IN (?, ?) "
                         "AND ended_at IS NULL ORDER BY id DESC LIMIT 1", (S, "r1.json", *OPEN)),
            "unwritten row": ("SELECT id FROM asks WHERE served_session = ? AND request_name = ? AND "
                              "response IS NOT NULL AND written IS NULL AND ended_at IS NULL ORDER BY id "
                              "DESC LIMIT 1", (S, "r1.json")),
            "recorded verdicts": ("SELECT request_id FROM asks WHERE served_session = ? AND request_id IN "
                                  "(?, ?) AND response IS NOT NULL ORDER BY id", (S, "r1", "r2")),
            "newest with a response": ("SELECT id FROM asks WHERE served_session = ? AND request_id = ? AND "
                                       "response IS NOT NULL ORDER BY id DESC LIMIT 1", (S, "r1")),
            "reconcile": ("SELECT id, request_name FROM asks WHERE served_session = ? AND verdict IS NULL "
                          "AND outcome IN (?, ?) AND ended_at IS NULL", (S, *OPEN)),
        }
        plans = {name: plan(conn, sql, params) for name, (sql, params) in statements.items()}
        for name, searched in plans.items():
            assert "USING" in searched and "INDEX" in searched, (name, searched)
            assert not searched.startswith("SCAN asks"), (name, searched)
        assert "asks_open" in plans["open rows"] and "asks_open" in plans["reconcile"]
        # and the table's own statement finds what is open
        conn.execute("BEGIN")
        found = AsksTable(conn).open_rows([AskKey(S, name) for name in names])
        conn.execute("ROLLBACK")
    assert set(found) == {AskKey(S, "r1000.json")}
