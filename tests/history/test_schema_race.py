"""Processes opening one new history at once (a courier and an approver started together on one
machine share the state dir): every one opens it; the schema is made once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.history.schema import VERSION, migrate

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)  # a hang guard, not a speed check

OPEN = ("import sys; from pathlib import Path; from core.history import HistoryStore; "
        "sys.stdin.readline(); HistoryStore.in_state_dir(Path(sys.argv[1])).close(); print('opened')")


def test_processes_opening_a_new_history_at_once_all_open_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    openers = [subprocess.Popen([sys.executable, "-c", OPEN, str(state)], cwd=REPO, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    for opener in openers:  # every one imported and waits: released together
        assert opener.stdin is not None
        opener.stdin.write("go\n")
        opener.stdin.flush()
    for opener in openers:
        out, err = opener.communicate(timeout=100)
        assert opener.returncode == 0 and out.strip() == "opened", err


class _Stale:
    """What `PRAGMA user_version` said before the other process migrated."""

    def __init__(self, row: tuple[int]) -> None:
        self.row = row

    def fetchone(self) -> tuple[int]:
        return self.row


class _RacedConnection(sqlite3.Connection):
    """A connection whose first look at the version is overtaken: another opener migrates the file
    right after it (the window two processes opening a new history at once hit)."""

    raced = False
    path = ""

    def execute(self, sql: str, *args: Any) -> Any:
        cursor = super().execute(sql, *args)
        if sql.startswith("PRAGMA user_version") and not self.raced:
            self.raced = True
            row = cursor.fetchone()
            other = sqlite3.connect(self.path, isolation_level=None, timeout=10)
            migrate(other)
            other.close()
            return _Stale(row)
        return cursor


def test_a_migration_another_opener_ran_first_is_taken_as_done(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None, timeout=10, factory=_RacedConnection)
    assert isinstance(conn, _RacedConnection)
    conn.path = str(path)
    try:
        assert migrate(conn) == VERSION and conn.raced
    finally:
        conn.close()
