"""The history schema as an ordered list of migrations; `PRAGMA user_version` says how many ran.

A migration is appended, never edited: an old file is brought forward step by step, each step in
its own transaction, so a crash mid-upgrade leaves the file at the last complete version.
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: one row per ask served.
    """
    CREATE TABLE asks (
        id INTEGER PRIMARY KEY,
        served_session TEXT NOT NULL,
        request_name TEXT NOT NULL,
        request_id TEXT,
        raw BLOB,
        agent TEXT,
        requester_session TEXT,
        surface TEXT,
        value TEXT,
        message TEXT,
        facts TEXT,
        created_at REAL,
        arrived_at REAL NOT NULL,
        shown_at REAL,
        decided_at REAL,
        verdict TEXT,
        decided_by TEXT,
        decider TEXT,
        responder_session TEXT,
        decide_ms REAL,
        outcome TEXT NOT NULL,
        reason TEXT,
        response BLOB,
        written INTEGER,
        ended_at REAL
    );
    CREATE INDEX asks_key ON asks (served_session, request_name);
    CREATE INDEX asks_request ON asks (served_session, request_id);
    CREATE INDEX asks_arrived ON asks (arrived_at);
    """,
    # 2: rows imported from pi's own review log, marked with their source and deduplicated.
    """
    ALTER TABLE asks ADD COLUMN source TEXT NOT NULL DEFAULT 'served';
    ALTER TABLE asks ADD COLUMN import_key TEXT;
    CREATE UNIQUE INDEX asks_import ON asks (import_key) WHERE import_key IS NOT NULL;
    CREATE INDEX asks_agent ON asks (agent);
    """,
    # 3: the open rows (no verdict, not ended: asks at a person, or waiting for their verdict) indexed
    # apart, a few among many: a burst's rows (written whole with their verdicts, never open) are
    # known to have none before them by one look per batch instead of one per ask.
    """
    CREATE INDEX asks_open ON asks (served_session, request_name) WHERE verdict IS NULL AND ended_at IS NULL;
    """,
    # 4: one short index of the names instead of two of (session, text): a burst's row costs one
    # insert at a random place in a B-tree, not two with twice the key (SQLite's insert of a row 10.6
    # -> 7.6 us with random ids, 26.9 -> 16.6 on a 100,000-row history). A request id's rows are
    # found by its file's name (`<id>.json`, what serving names them), and the rows named otherwise
    # (a courier's parcels, a quarantined file whose id is not its name) by an index of their own
    # (`asks_odd`, empty in a history only `serve` wrote: a session with none skips it): together
    # exactly the rows with that id. A session's rows (the restart's look, the sessions listed) by
    # its own index, whose burst inserts follow each other.
    """
    DROP INDEX asks_key;
    DROP INDEX asks_request;
    CREATE INDEX asks_name ON asks (request_name);
    CREATE INDEX asks_session ON asks (served_session);
    CREATE INDEX asks_odd ON asks (served_session, request_id) WHERE request_name <> request_id || '.json';
    """,
)
VERSION = len(MIGRATIONS)


class HistoryTooNew(RuntimeError):
    """The file was written by a newer pi-authorizer; refusing beats silently mangling it."""


def user_version(conn: sqlite3.Connection) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return version


def migrate(conn: sqlite3.Connection, target: int = VERSION) -> int:
    """Run the migrations after the file's version up to `target`; returns the version reached."""
    current = user_version(conn)
    if current > VERSION:
        raise HistoryTooNew(f"history schema version {current} is newer than this program's {VERSION}")
    for index in range(current, target):
        # executescript commits first; the explicit transaction makes each step all-or-nothing.
        script = f"BEGIN IMMEDIATE;\n{MIGRATIONS[index]}\nPRAGMA user_version = {index + 1};\nCOMMIT;"
        try:
            conn.executescript(script)
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if user_version(conn) > index:
                continue  # another process opening the same new file (a courier and an approver) ran it first
            raise
    return user_version(conn)
