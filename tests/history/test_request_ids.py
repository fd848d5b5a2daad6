"""A request id's rows found through the names' index (schema version 4): whatever a row's name and
id say (`<id>.json`, a courier's parcel, a file quarantined under another id, no id at all), the
lookups by id find exactly the rows the plain `request_id = ?` finds, and the marks land where they
landed; a version-3 file is brought forward; on a big history every statement of a burst, of its
marks, of the intake's look and of the restart searches an index, with or without SQLite's
statistics."""

# The statements these replaced are the oracles here, written out as they were.
# ruff: noqa: S608

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.history import VERSION, migrate
from core.history.table import AsksTable, by_ids, id_params
from core.serving.verdicts import VerdictRow, WrittenMark
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent

S = "019ff969-c34c-70be-9034-fae19c852932"
T = "nats:another"
IDS = ["a", "b", "c", "a.json", "r-1"]
#: A row: its session, name, request id, response, outcome.
ROW = st.tuples(
    st.sampled_from([S, T]),
    st.sampled_from([*(f"{i}.json" for i in IDS), "a", "parcel-7", "", "b.json.json"]),
    st.sampled_from([*IDS, None]),
    st.sampled_from([None, b"{}", b"{\"x\":1}"]),
    st.sampled_from(["rule", "contested", "pending", "quarantined"]),
)


def history(rows: list[tuple[str, str, str | None, bytes | None, str]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    conn.executemany(
        "INSERT INTO asks (served_session, request_name, request_id, response, outcome, arrived_at) "
        "VALUES (?, ?, ?, ?, ?, 1.0)", rows)
    return conn


def plain_recorded(conn: sqlite3.Connection, session: str, ids: list[str]) -> dict[str, VerdictRow]:
    """What `recorded_verdicts` found before version 4."""
    found: dict[str, VerdictRow] = {}
    for request_id, body, written, outcome, ended in conn.execute(
        "SELECT request_id, response, written, outcome, ended_at IS NOT NULL FROM asks "
        f"WHERE served_session = ? AND request_id IN ({', '.join('?' * len(ids))}) "
        "AND response IS NOT NULL ORDER BY id", (session, *ids),
    ):
        found[request_id] = VerdictRow(body, bool(written), outcome, bool(ended))
    return found


def plain_marks(conn: sqlite3.Connection, marks: list[WrittenMark], now: float) -> None:
    """What `mark_written` did before version 4: a batch of plain marks, then any other, one by one."""
    if all(m.written and m.why is None for m in marks):
        for m in marks:
            conn.execute(
                "UPDATE asks SET written = CASE outcome WHEN 'contested' THEN 0 ELSE 1 END, "
                "ended_at = COALESCE(ended_at, ?) WHERE id IN (SELECT MAX(id) FROM asks "
                "WHERE served_session = ? AND request_id IN (?) AND response IS NOT NULL "
                "GROUP BY request_id)",
                (now, m.key.session_id, m.request_id))
        return
    conn.executemany(
        "UPDATE asks SET written = CASE outcome WHEN 'contested' THEN 0 ELSE ? END, "
        "reason = COALESCE(?, reason), ended_at = CASE WHEN ? THEN COALESCE(ended_at, ?) "
        "ELSE ended_at END "
        "WHERE id = (SELECT id FROM asks WHERE served_session = ? AND request_id = ? "
        "AND response IS NOT NULL ORDER BY id DESC LIMIT 1)",
        [(int(m.written), m.why, m.written or m.why is not None, now, m.key.session_id, m.request_id)
         for m in marks])


@settings(max_examples=300, deadline=None)
@given(st.lists(ROW, max_size=14), st.lists(st.sampled_from(IDS), min_size=1, max_size=4, unique=True),
       st.sampled_from([S, T]))
def test_the_rows_of_request_ids_are_exactly_those_with_the_ids(
    rows: list[tuple[str, str, str | None, bytes | None, str]], ids: list[str], session: str,
) -> None:
    """The two parts of `by_ids` split the rows with those ids, none twice, none left out (the first
    alone when the session has no row named apart from its id); the recorded verdicts read through
    them are the plain query's."""
    with contextlib.closing(history(rows)) as conn:
        def found(odd: bool) -> list[int]:
            return [i for (i,) in conn.execute(
                f"SELECT id FROM asks WHERE {by_ids(len(ids), odd)} AND served_session = ? ORDER BY id",
                (*id_params(ids, session if odd else None), session))]

        plain = [i for (i,) in conn.execute(
            f"SELECT id FROM asks WHERE request_id IN ({', '.join('?' * len(ids))}) AND served_session = ? "
            "ORDER BY id", (*ids, session))]
        table = AsksTable(conn)
        apart = any(s == session and i is not None and n != f"{i}.json" for s, n, i, *_ in rows)
        assert table.odd(session) == apart
        assert found(odd=True) == plain
        if not apart:
            assert found(odd=False) == plain
        assert table.recorded_verdicts(session, ids) == plain_recorded(conn, session, ids)


MARK = st.tuples(st.sampled_from([S, T]), st.sampled_from(IDS), st.booleans(), st.none() | st.just("why"))


@settings(max_examples=300, deadline=None)
@given(st.lists(ROW, max_size=14), st.lists(MARK, min_size=1, max_size=5))
def test_marks_land_where_they_landed(
    rows: list[tuple[str, str, str | None, bytes | None, str]],
    marks: list[tuple[str, str, bool, str | None]],
) -> None:
    """Plain marks (a batch's) and any others, of ids named any way: the table after is the one the
    statements before version 4 left."""
    written = [WrittenMark(AskKey(session, f"{request_id}.json"), request_id, done, why)
               for session, request_id, done, why in marks]
    after = []
    for by_table in (True, False):
        with contextlib.closing(history(rows)) as conn:
            if by_table:
                AsksTable(conn).mark_written(written, 5.0)
            else:
                plain_marks(conn, written, 5.0)
            after.append(conn.execute("SELECT * FROM asks ORDER BY id").fetchall())
    assert after[0] == after[1]


def test_a_version_3_history_is_brought_forward_and_its_ids_found(tmp_path: Path) -> None:
    """A served row, a courier's parcel (named by its parcel id), a file quarantined under another id
    and a session row, written at version 3: version 4 keeps them, drops the two long indexes, and
    finds each id's verdict and marks it."""
    path = tmp_path / "history.sqlite3"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        assert migrate(conn, target=3) == 3
        conn.executemany(
            "INSERT INTO asks (served_session, request_name, request_id, arrived_at, outcome, response) "
            "VALUES (?, ?, ?, 1.0, ?, ?)",
            [(S, "served.json", "served", "rule", b"1"), (T, "parcel-9", "carried", "courier", b"2"),
             (S, "named.json", "other", "quarantined", None), (S, "", None, "not-serving", None)])
        assert migrate(conn) == VERSION == 4
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"asks_name", "asks_session", "asks_odd", "asks_open", "asks_arrived", "asks_agent"} <= indexes
        assert not {"asks_key", "asks_request"} & indexes
        table = AsksTable(conn)
        assert set(table.recorded_verdicts(S, ["served", "other"])) == {"served"}
        assert set(table.recorded_verdicts(T, ["carried"])) == {"carried"}
        table.mark_written([WrittenMark(AskKey(T, "parcel-9"), "carried", True)], 3.0)
        table.mark_written([WrittenMark(AskKey(S, "served.json"), "served", False, "why")], 3.0)
        assert conn.execute("SELECT request_name, written FROM asks ORDER BY id").fetchall() == [
            ("served.json", 0), ("parcel-9", 1), ("named.json", None), ("", None)]


def test_the_statements_of_a_big_history_search_indexes(tmp_path: Path) -> None:
    """100,000 rows (a few open, every seventh of one session a parcel named apart from its id, none of
    the other's): every statement the table runs for a request file, a request id, a batch's marks
    and the restart's look searches an index (never the table, never a whole session's rows for one
    name), with no statistics (as the program leaves the file) and with `ANALYZE`'s."""
    path = tmp_path / "history.sqlite3"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        migrate(conn)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO asks (served_session, request_name, request_id, arrived_at, outcome, verdict, "
            "response, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ((S if n % 3 else T, f"r{n}.json" if n % 7 or not n % 3 else f"parcel-{n}", f"r{n}", float(n), *(
                ("pending", None, None, None) if n % 1000 == 0 else ("rule", "approved", b"{}", float(n))))
             for n in range(100_000)))
        conn.execute("COMMIT")
        for analyzed in (False, True):
            if analyzed:
                conn.execute("ANALYZE")
            statements: list[str] = []
            conn.set_trace_callback(statements.append)
            table = AsksTable(conn)
            key = AskKey(S, "r1.json")
            conn.execute("BEGIN")
            table.open_row(key)
            found = table.open_rows([key, AskKey(S, "r1000.json"), AskKey(T, "r3.json")])
            assert set(found) == {AskKey(S, "r1000.json")}
            table.unwritten_row(key)
            table.holds_response(key, b"{}")
            assert set(table.recorded_verdicts(S, ["r1", "r2", "r7", "r3"])) == {"r1", "r2", "r7"}
            table.mark_written([WrittenMark(key, "r1", True), WrittenMark(key, "r7", True)], 1.0)
            table.mark_written([WrittenMark(key, "r1", False, "why")], 1.0)
            # a session with no row named apart from its id (T's): the names' index alone
            assert set(table.recorded_verdicts(T, ["r3", "r21", "r1"])) == {"r3", "r21"}
            table.mark_written([WrittenMark(AskKey(T, "r3.json"), "r3", True)], 1.0)
            table.in_batch(key, b"x", 2)
            table.contest(ServeEvent("contested", key, 1.0, reason="another"))
            table.leave(key)
            table.shown(key, 1.0)
            table.reconcile_open(S, {"r1.json"}, 1.0, None)
            conn.execute("ROLLBACK")
            conn.set_trace_callback(None)
            looked = [sql for sql in statements if sql.startswith(("SELECT", "UPDATE"))]
            assert len(looked) >= 13
            for sql in looked:
                plan = " | ".join(d for *_, d in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
                assert "SCAN" not in plan, (analyzed, sql, plan)
                if "request_name = '" in sql or "request_name IN" in sql:
                    assert "(served_session=?)" not in plan, (analyzed, sql, plan)
