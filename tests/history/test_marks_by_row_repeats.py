"""`mark_written_rows` given an id twice (its argument is any collection of ids): the rows it marks are
exactly those it was given. Sorted ids spanning exactly their count are taken for one run of
consecutive ids; a repeat and a gap cancel out ([1, 1, 3] spans 3 ids in 3 entries), so the ids are
taken each once first, or the ranged UPDATE would mark row 2, which nobody said was written (review3,
finding 1)."""

from __future__ import annotations

import sqlite3

from core.history.schema import migrate
from core.history.table import AsksTable


def test_a_repeated_id_never_marks_a_row_outside_the_ids_given() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    conn.executemany(
        "INSERT INTO asks (id, served_session, request_name, arrived_at, outcome, response) "
        "VALUES (?, 's', ?, 1.0, 'rule', x'7b7d')",
        [(i, f"r{i}.json") for i in range(1, 4)])
    AsksTable(conn).mark_written_rows([1, 1, 3], 5.0)
    rows = dict(conn.execute("SELECT id, written FROM asks").fetchall())
    assert rows == {1: 1, 2: None, 3: 1}  # row 2's answer was never said written
