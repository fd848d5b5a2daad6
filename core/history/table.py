"""The asks table's statements, every one: each read and write of a history row, in one room.

`AsksTable` is the table on one connection. The writer (`core.history.transactions`) opens a
transaction and hands the table over; the store (`core.history.store`) says what happened and calls
one method here for it, which does the whole write: a verdict batch reads straight down in
`record_verdicts`, from finding each request file's row to the rows inserted and updated. The
readers (`core.history.queries`) run their statements through it too. The columns a row stores are
computed in `core.history.rows`; which row is a request file's own (open, or decided and unwritten)
is decided here, next to the statements that use it: every later fact about an ask (its verdict,
shown, left, withdrawn) lands in that row, and a request served again after a restart reopens it
instead of adding a second one.

The statements are one idea (the schema's rows as this program writes and reads them): split by
caller, one verdict write used to cross three modules ten times.

Size: every statement on the asks table and the choice of which row each lands in, kept together;
a part split out would take the row-finding rules with it, and its callers would cross back.
"""

# SQL text here is assembled from constant fragments only; every value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import NamedTuple

from core.history.rows import (
    COLUMNS,
    VERDICT_ROW,
    HistoryRow,
    arrival_values,
    fail_safe_columns,
    storable,
    verdict_columns,
    verdict_row,
)
from core.serving.verdicts import VerdictRecord, VerdictRow, WrittenMark
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.request import ParsedRequest
from core.wire.response import encode_response

#: The outcomes of a row whose ask has not ended.
OPEN = ("pending", "left")
#: Why a recorded verdict's row ended at a restart with neither its request nor its response there.
UNNOTED_GONE = ("its request and response were gone when serving resumed: its child read this answer or "
                "stopped waiting (not noted before a restart)")
SELECT_ROWS = f"SELECT {', '.join(COLUMNS)} FROM asks"
#: The statement of a burst's new rows (`AsksTable.insert_verdict_rows`).
INSERT_VERDICT_ROW = (
    f"INSERT INTO asks ({', '.join(VERDICT_ROW)}) VALUES ({', '.join('?' * len(VERDICT_ROW))})"
)
#: The largest id SQLite gives a row (past it, new ids are picked at random).
LARGEST_ID = 2**63 - 1
#: Ids per `IN (...)` list (SQLite's bound-parameter limit is far above; the statements stay short).
CHUNK = 500


#: The rows of a request id named otherwise than `<id>.json` (schema version 4's `asks_odd`).
ODD = "request_name <> request_id || '.json'"


def by_ids(count: int, odd: bool = True) -> str:
    """The condition "the row's request id is one of `count` ids" (bound by `id_params`), through
    indexes (schema version 4): the rows named `<id>.json` (what serving names them) by the names'
    index, the rows named otherwise (a courier's parcels, a file quarantined under another id) by
    their own (`asks_odd`), looked at only when the session has such rows (`odd`: `AsksTable.odd`).
    The two parts split the rows with those ids exactly, whatever a request file's name and its id
    say (`tests/history/test_request_ids.py`)."""
    marks = ", ".join("?" * count)
    named = (f"SELECT id FROM asks INDEXED BY asks_name WHERE request_name IN ({marks}) "
             "AND request_name = request_id || '.json'")
    if not odd:
        return f"id IN ({named})"
    return (f"id IN ({named} UNION ALL SELECT id FROM asks INDEXED BY asks_odd WHERE {ODD} "
            f"AND served_session = ? AND request_id IN ({marks}))")


def id_params(request_ids: Sequence[str], session_id: str | None = None) -> tuple[str, ...]:
    """The parameters of `by_ids(len(request_ids), odd)`: the ids' file names, then (with `odd`: its
    `session_id`) the session and the ids."""
    names = [f"{request_id}.json" for request_id in request_ids]
    return (*names,) if session_id is None else (*names, session_id, *request_ids)


class Found(NamedTuple):
    """A request file's row: its id, and when the ask's time counts from (shown, else arrived)."""

    id: int
    started: float


#: The notes on one request a full disk may refuse when they come: queued then, written in order.
NOTES = frozenset({"withdrawn", "left", "answer_failed", "contested"})


class AsksTable:
    """The asks table on one connection. `added` counts the rows inserted through it (retention runs
    every so many new rows)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.added = 0

    def odd(self, session_id: str) -> bool:
        """Whether a row of this session is named otherwise than by its request id (`by_ids`): one
        seek into `asks_odd`, which a history only `serve` wrote leaves empty."""
        return self.conn.execute(
            f"SELECT 1 FROM asks INDEXED BY asks_odd WHERE {ODD} AND served_session = ? LIMIT 1",
            storable((session_id,)),
        ).fetchone() is not None

    # -- the row of a request file --------------------------------------------------------------

    def open_row(self, key: AskKey) -> Found | None:
        """The open row of this request file: an ask that has not ended (no verdict, not withdrawn)."""
        found = self.conn.execute(
            "SELECT id, COALESCE(shown_at, arrived_at) FROM asks WHERE served_session = ? "
            "AND request_name = ? AND verdict IS NULL AND outcome IN (?, ?) AND ended_at IS NULL "
            "ORDER BY id DESC LIMIT 1",
            storable((key.session_id, key.name, *OPEN)),  # a name with a lone surrogate as rows hold it
        ).fetchone()
        return None if found is None else Found(found[0], found[1])

    def open_rows(self, keys: Iterable[AskKey]) -> dict[AskKey, Found]:
        """`open_row` for many request files at once (a burst's arrivals or verdicts), by key. A session
        with no open row at all (a burst answered in its intakes' trips: its rows are written whole)
        is told by one look at the open rows' own index (`asks_open`), not one per request file."""
        keys = list(keys)
        found: dict[AskKey, Found] = {}
        # Each session once, in order; its names listed only where it has an open row (a burst's has none).
        for session_id in dict.fromkeys([key.session_id for key in keys]):
            if self.conn.execute(
                "SELECT 1 FROM asks INDEXED BY asks_open WHERE served_session = ? AND verdict IS NULL "
                "AND ended_at IS NULL LIMIT 1", storable((session_id,)),
            ).fetchone() is None:
                continue
            # Its names, in order, once (review, F3).
            listed = list(dict.fromkeys([key.name for key in keys if key.session_id == session_id]))
            for start in range(0, len(listed), CHUNK):
                chunk = listed[start : start + CHUNK]
                marks = ", ".join("?" for _ in chunk)
                for row_id, name, started in self.conn.execute(
                    "SELECT id, request_name, COALESCE(shown_at, arrived_at) FROM asks INDEXED BY asks_open "
                    f"WHERE served_session = ? AND request_name IN ({marks}) AND verdict IS NULL "
                    "AND outcome IN (?, ?) AND ended_at IS NULL ORDER BY id",
                    storable((session_id, *chunk, *OPEN)),
                ):
                    found[AskKey(session_id, name)] = Found(row_id, started)  # the newest wins
        return found

    def unwritten_row(self, key: AskKey) -> Found | None:
        """The row of an ask whose verdict was recorded but whose response was never written, and which
        has not ended: its child is still unanswered (the write failed). A later verdict for the same
        request file (decided again) or its withdrawal lands in this row, so one ask keeps one row."""
        found = self.conn.execute(
            "SELECT id, COALESCE(shown_at, arrived_at) FROM asks INDEXED BY asks_name "
            "WHERE served_session = ? AND request_name = ? AND response IS NOT NULL AND written IS NULL "
            "AND ended_at IS NULL ORDER BY id DESC LIMIT 1",
            storable((key.session_id, key.name)),
        ).fetchone()
        return None if found is None else Found(found[0], found[1])

    def holds_response(self, key: AskKey, body: bytes) -> bool:
        """Whether a row of this request file already holds exactly this response."""
        return self.conn.execute(
            "SELECT 1 FROM asks INDEXED BY asks_name WHERE served_session = ? AND request_name = ? "
            "AND response = ? LIMIT 1",
            storable((key.session_id, key.name, body)),
        ).fetchone() is not None

    # -- new rows -------------------------------------------------------------------------------

    def insert(self, values: dict[str, object]) -> int:
        """One new row; its id."""
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cursor = self.conn.execute(f"INSERT INTO asks ({names}) VALUES ({marks})", storable(values.values()))
        self.added += 1
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def insert_new(self, rows: Sequence[dict[str, object]]) -> int:
        """Bulk insert (imports, benchmarks); rows whose `import_key` is already stored are skipped."""
        added = 0
        for values in rows:
            names = ", ".join(values)
            marks = ", ".join("?" for _ in values)
            cursor = self.conn.execute(
                f"INSERT OR IGNORE INTO asks ({names}) VALUES ({marks})", tuple(values.values())
            )
            added += cursor.rowcount
        self.added += added
        return added

    def arrive(self, key: AskKey, parsed: ParsedRequest | None, at: float, raw: bytes | None = None) -> Found:
        """A new row for an ask that arrived at `at` (its time counts from then)."""
        return Found(self.insert(arrival_values(key, parsed, at, raw)), at)

    # -- what the writer's queue holds ----------------------------------------------------------

    def write_queued(self, pending: Sequence[ServeEvent]) -> None:
        """The queued events in the order observed: each run of arrivals (one lookup of the open rows
        for all of them, then a row each), then each fail-safe answer the ledger did not record. In
        order, so a close queued before a new request under the same name closes its own ask's row,
        and the new request gets a row of its own (arrivals first merged it into the old row, which
        the close then ended: the new ask had none)."""
        arrivals: list[ServeEvent] = []
        for event in pending:
            if event.kind == "arrived":
                arrivals.append(event)
                continue
            self._arrive_queued(arrivals)
            arrivals = []
            if event.kind == "answered":
                self._close_unrecorded(event)
            else:  # a note a full disk refused when it came (`HistoryStore.observe`)
                self.note(event)
        self._arrive_queued(arrivals)

    def note(self, event: ServeEvent) -> None:
        """A note on one request (`NOTES`): what `HistoryStore.observe` writes of it."""
        kind = event.kind
        if kind == "withdrawn":
            self.withdraw(event)
        elif kind == "left":
            self.leave(event.key)
        elif kind == "answer_failed":
            self.answer_failed(event.key, event.reason)
        elif kind == "contested":
            self.contest(event)

    def _arrive_queued(self, arrivals: Sequence[ServeEvent]) -> None:
        if not arrivals:
            return
        found = self.open_rows(event.key for event in arrivals)
        for event in arrivals:
            assert event.parsed is not None
            row = found.get(event.key)
            if row is None:
                found[event.key] = self.arrive(event.key, event.parsed, event.at, event.raw)
            else:
                # Served again after a restart: the same ask, so the same row.
                self.conn.execute("UPDATE asks SET outcome = 'pending' WHERE id = ?", (row.id,))

    def _close_unrecorded(self, event: ServeEvent) -> None:
        """The fail-safe denial published when the ledger refused the verdict: the row says so, and
        keeps its bytes (a request under that id is never answered twice)."""
        assert event.parsed is not None and event.response is not None
        body = encode_response(event.response)
        found = self.open_row(event.key)
        if found is None and self.holds_response(event.key, body):
            return  # already closed (a spool replayed twice)
        row = found or self.arrive(event.key, event.parsed, event.at)
        self._update(row.id, fail_safe_columns(event.response, body, event.at, row.started))

    def _update(self, row_id: int, columns: dict[str, object]) -> None:
        assignments = ", ".join(f"{name} = ?" for name in columns)
        params = storable((*columns.values(), row_id))
        self.conn.execute(f"UPDATE asks SET {assignments} WHERE id = ?", params)

    # -- the ledger -----------------------------------------------------------------------------

    def record_verdicts(
        self, verdicts: Sequence[VerdictRecord], take_arrival: Callable[[AskKey], ServeEvent | None] | None,
        now: float,
    ) -> dict[tuple[str, str], int]:
        """A batch's verdicts. One whose arrival is still queued (`take_arrival`: a burst) is written with
        it as one new row, all of those in one `executemany`; any other updates the open row of its
        request file, or the row of a verdict never written (decided again after a failed write), or a
        row made for it. The person's time counts from when the ask was shown; a rule's from its arrival.
        (`take_arrival` None: none of theirs is queued.) Returns the row that holds each verdict, by
        session and request id (where `mark_written_rows` notes its response written)."""
        found = self.open_rows(verdict.key for verdict in verdicts)
        if take_arrival is None and not found and None not in [verdict.arrived for verdict in verdicts]:
            # A burst answered in its intakes' trips: every row new, written whole (the loop below, in
            # one expression per ask: it runs once per ask of a burst).
            first = self.insert_verdict_rows(
                [verdict_row(v, v.parsed, v.arrived or 0.0, v.raw, now) for v in verdicts])
            if first is None:
                return {}
            return {(v.key.session_id, v.parsed.request.id): at for at, v in enumerate(verdicts, first)}
        fresh: list[tuple[object, ...]] = []
        fresh_of: list[VerdictRecord] = []
        held: dict[tuple[str, str], int] = {}
        for verdict in verdicts:
            arrival = take_arrival(verdict.key) if take_arrival is not None else None
            if arrival is not None and arrival.parsed is not None and (
                    arrival.parsed.raw != verdict.parsed.raw):
                # Another request under the same name: its own row; the verdict never takes its id.
                self.arrive(arrival.key, arrival.parsed, arrival.at, arrival.raw)
                arrival = None
            row = found.get(verdict.key) if found else None  # none in a burst (its rows are new)
            if row is None and arrival is not None:
                assert arrival.parsed is not None
                fresh.append(verdict_row(verdict, arrival.parsed, arrival.at, arrival.raw, now))
                fresh_of.append(verdict)
                continue
            if row is None and verdict.arrived is not None:  # answered in its intake's trip: none queued
                fresh.append(verdict_row(verdict, verdict.parsed, verdict.arrived, verdict.raw, now))
                fresh_of.append(verdict)
                continue
            row = row or self.unwritten_row(verdict.key) or self.arrive(verdict.key, verdict.parsed, now)
            self._update(row.id, verdict_columns(verdict, now, row.started))
            held[verdict.key.session_id, verdict.request_id] = row.id
        first = self.insert_verdict_rows(fresh)
        if first is not None:  # the new rows are the newest: a key written twice is held by its last
            for row_id, verdict in enumerate(fresh_of, first):
                held[verdict.key.session_id, verdict.parsed.request.id] = row_id  # its `request_id`
        return held

    def insert_verdict_rows(self, rows: Sequence[tuple[object, ...]]) -> int | None:
        """A burst's new rows (`verdict_row`) in one `executemany` of plain tuples; the id of the first
        (the others follow it: SQLite gives a new row the largest id plus one, and this transaction
        holds the write lock), or None when none was inserted or the ids are not known to follow (the
        largest id taken). Text with a lone surrogate (SQLite cannot bind it: `storable`) is rare: the
        rows go as they are, and only when one is refused are all of them inserted again `storable`
        (looking at each value of each row first cost a burst more than the insert itself)."""
        if not rows:
            return None
        conn = self.conn
        before: int = conn.execute("SELECT COALESCE(MAX(id), 0) FROM asks").fetchone()[0]
        if before > LARGEST_ID - len(rows):  # SQLite picks ids at random there: none is known, none undone
            conn.executemany(INSERT_VERDICT_ROW, [storable(row) for row in rows])
            self.added += len(rows)
            return None
        try:
            conn.executemany(INSERT_VERDICT_ROW, rows)
        except UnicodeEncodeError:  # refused as its row was bound: the rows inserted before it go
            conn.execute("DELETE FROM asks WHERE id > ?", (before,))
            conn.executemany(INSERT_VERDICT_ROW, [storable(row) for row in rows])
        self.added += len(rows)
        last: int = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        return before + 1 if last == before + len(rows) else None

    def mark_written_rows(self, row_ids: Collection[int], now: float) -> None:
        """`mark_written` of plain marks whose rows are known (`record_verdicts` returned them): by id,
        a run of consecutive ids (a burst's rows, inserted together) in one statement, without looking
        for each request's newest row first."""
        ordered = sorted(set(row_ids))  # each once: a repeat and a gap would span their count (review3, 1)
        if not ordered:
            return
        # Sorted ids, each once, spanning exactly their count are one run: the usual burst's, told
        # without a look at each id.
        runs = [(ordered[0], ordered[-1])] if ordered[-1] - ordered[0] == len(ordered) - 1 else _runs(ordered)
        for first, last in runs:
            self.conn.execute(
                "UPDATE asks SET written = CASE outcome WHEN 'contested' THEN 0 ELSE 1 END, "
                "ended_at = COALESCE(ended_at, ?) WHERE id BETWEEN ? AND ? AND response IS NOT NULL",
                (now, first, last),
            )

    def mark_written(self, marks: Sequence[WrittenMark], now: float) -> None:
        """The responses were linked (or found already there): for their children the asks have ended
        (a `contested` row never says its answer was delivered). Each mark lands in the newest row with
        a response for its request id; a batch of plain marks (linked, no why: a burst's) is one
        statement per session and `CHUNK` ids (a statement per row cost twice the row's update)."""
        if all(m.written and m.why is None for m in marks):
            sessions: dict[str, dict[str, None]] = {}
            for mark in marks:
                sessions.setdefault(mark.key.session_id, {})[mark.request_id] = None
            for session_id, unique in sessions.items():
                listed = list(unique)
                odd = self.odd(session_id)
                for start in range(0, len(listed), CHUNK):
                    chunk = listed[start : start + CHUNK]
                    self.conn.execute(
                        "UPDATE asks SET written = CASE outcome WHEN 'contested' THEN 0 ELSE 1 END, "
                        "ended_at = COALESCE(ended_at, ?) WHERE id IN (SELECT MAX(id) FROM asks "
                        f"WHERE {by_ids(len(chunk), odd)} AND served_session = ? "
                        "AND response IS NOT NULL GROUP BY request_id)",
                        (now, *id_params(chunk, session_id if odd else None), session_id),
                    )
            return
        odd = any(self.odd(session_id) for session_id in {m.key.session_id for m in marks})
        self.conn.executemany(
            "UPDATE asks SET written = CASE outcome WHEN 'contested' THEN 0 ELSE ? END, "
            "reason = COALESCE(?, reason), ended_at = CASE WHEN ? THEN COALESCE(ended_at, ?) "
            "ELSE ended_at END "
            f"WHERE id = (SELECT MAX(id) FROM asks WHERE {by_ids(1, odd)} AND served_session = ? "
            "AND response IS NOT NULL)",
            [(int(m.written), m.why, m.written or m.why is not None, now,
              *id_params((m.request_id,), m.key.session_id if odd else None), m.key.session_id)
             for m in marks],
        )

    def reconcile_open(
        self, session_id: str, present: Collection[str], ended: float,
        delivered: Callable[[str, bytes], bool] | None,
    ) -> int:
        """At start, before serving (see `HistoryStore.reconcile_open`): the open rows whose request file
        is gone end withdrawn (a `left` one stays `left`); the rows with a verdict never noted written
        whose request file is gone end, written when `delivered` says the response holds those bytes.
        How many rows were closed."""
        rows = self.conn.execute(
            "SELECT id, request_name FROM asks WHERE served_session = ? AND verdict IS NULL "
            "AND outcome IN (?, ?) AND ended_at IS NULL",
            (session_id, *OPEN),
        ).fetchall()
        gone = [row_id for row_id, name in rows if name not in present]
        for row_id in gone:
            self.conn.execute(
                "UPDATE asks SET ended_at = ?, outcome = CASE outcome WHEN 'left' THEN 'left' "
                "ELSE 'withdrawn' END, reason = COALESCE(reason, ?) WHERE id = ?",
                (ended, "the request file was gone when serving resumed", row_id),
            )
        decided = [
            (row_id, request_id, bytes(body))
            for row_id, name, request_id, body in self.conn.execute(
                "SELECT id, request_name, request_id, response FROM asks WHERE served_session = ? "
                "AND response IS NOT NULL AND written IS NULL AND ended_at IS NULL",
                storable((session_id,)),
            ).fetchall()
            if name not in present
        ]
        for row_id, request_id, body in decided:
            if delivered is not None and request_id is not None and delivered(request_id, body):
                self.conn.execute("UPDATE asks SET written = 1, ended_at = ? WHERE id = ?", (ended, row_id))
            else:
                self.conn.execute(
                    "UPDATE asks SET ended_at = ?, reason = COALESCE(reason, ?) WHERE id = ?",
                    (ended, UNNOTED_GONE, row_id),
                )
        return len(gone) + len(decided)

    # -- what the observer and the app note ------------------------------------------------------

    def withdraw(self, event: ServeEvent) -> None:
        """The request file went away unanswered (or another approver decided it: `event.reason`)."""
        found = self.open_row(event.key)
        if found is None:
            if self._end_unanswered(event.key, event.at, event.reason) or event.parsed is None:
                return
            found = self.arrive(event.key, event.parsed, event.at)
        # A left ask that vanishes was most likely answered elsewhere: it stays `left`.
        # Why, when it was not the child (decided by another approver): kept on the row.
        self.conn.execute(
            "UPDATE asks SET ended_at = ?, outcome = CASE outcome WHEN 'left' THEN 'left' "
            "ELSE 'withdrawn' END, reason = COALESCE(?, reason) WHERE id = ?",
            storable((event.at, event.reason, found.id)),
        )

    def _end_unanswered(self, key: AskKey, at: float, why: str | None = None) -> bool:
        """The child withdrew an ask whose recorded verdict was never written (or another answer won its
        one place, `why`): its row ends `withdrawn`, with no verdict (the child received none) and the
        recorded bytes kept (the ledger's). False when the request file has no such row."""
        found = self.unwritten_row(key)
        if found is not None:
            reason = why or "decided, but the response could not be written before the child withdrew"
            self.conn.execute(
                "UPDATE asks SET ended_at = ?, outcome = 'withdrawn', verdict = NULL, reason = ? "
                "WHERE id = ?",
                storable((at, reason, found.id)),
            )
        return found is not None

    def leave(self, key: AskKey) -> None:
        """The ask was left to another server (its open row says `left`)."""
        found = self.open_row(key)
        if found is not None:
            self.conn.execute("UPDATE asks SET outcome = 'left' WHERE id = ?", (found.id,))

    def answer_failed(self, key: AskKey, reason: str | None) -> None:
        """Its answer could not be written (yet): the open row says why."""
        found = self.open_row(key)
        if found is not None:
            self.conn.execute("UPDATE asks SET reason = ? WHERE id = ?", storable((reason, found.id)))

    def shown(self, key: AskKey, at: float) -> None:
        """Shown to the person (the first time counts)."""
        found = self.open_row(key)
        if found is not None:
            self.conn.execute("UPDATE asks SET shown_at = COALESCE(shown_at, ?) WHERE id = ?", (at, found.id))

    def in_batch(self, key: AskKey, raw: bytes, size: int) -> None:
        """The person decided these very bytes as one of a batch of `size`: its decider says so."""
        self.conn.execute(
            "UPDATE asks SET decider = COALESCE(decider, 'person') || ? WHERE id = "
            "(SELECT id FROM asks INDEXED BY asks_name WHERE served_session = ? AND request_name = ? "
            "AND raw = ? AND verdict IS NOT NULL ORDER BY id DESC LIMIT 1) "
            "AND COALESCE(decider, '') NOT LIKE '%batch of%'",
            storable((f", in a batch of {size}", key.session_id, key.name, raw)),
        )

    def not_serving(self, event: ServeEvent) -> None:
        """A session row (no request name): the session stopped being served, and why."""
        row = self.arrive(AskKey(event.key.session_id, ""), None, event.at)
        self.conn.execute(
            "UPDATE asks SET outcome = 'not-serving', reason = ?, ended_at = ? WHERE id = ?",
            storable((event.reason, event.at, row.id)),
        )

    def contest(self, event: ServeEvent) -> None:
        """Another server answered this request too: its row (the verdict recorded, or the ask still
        open) never says this node's answer was delivered; the verdict recorded is kept."""
        self.conn.execute(
            "UPDATE asks SET outcome = 'contested', written = 0, reason = ?, "
            "ended_at = COALESCE(ended_at, ?) WHERE id = (SELECT id FROM asks INDEXED BY asks_name "
            "WHERE served_session = ? "
            "AND request_name = ? AND (response IS NOT NULL OR ended_at IS NULL) "
            "ORDER BY id DESC LIMIT 1)",
            storable((event.reason, event.at, event.key.session_id, event.key.name)),
        )

    def quarantine(self, event: ServeEvent, parsed: ParsedRequest | None) -> None:
        """A row of its own for a request file quarantined (or forged), ended with the reason."""
        row = self.arrive(event.key, parsed, event.at, event.raw)
        self.conn.execute(
            "UPDATE asks SET outcome = ?, reason = ?, ended_at = ? WHERE id = ?",
            storable((event.kind, event.reason, event.at, row.id)),
        )

    def note_set_aside_answered(self, key: AskKey, raw: bytes) -> None:
        """The child of a file being set aside was answered (its gate denial linked): its newest
        quarantined row with these bytes says so (`written`), before the file moves."""
        self.conn.execute(
            "UPDATE asks SET written = 1 WHERE id = (SELECT id FROM asks WHERE served_session = ? "
            "AND request_name = ? AND outcome = 'quarantined' AND raw = ? ORDER BY id DESC LIMIT 1)",
            storable((key.session_id, key.name, raw)),
        )

    def set_aside_answered(self, key: AskKey, raw: bytes) -> bool:
        """Whether a quarantined row of this request file with these very bytes says its child was
        answered (`note_set_aside_answered`)."""
        return self.conn.execute(
            "SELECT 1 FROM asks WHERE served_session = ? AND request_name = ? AND outcome = 'quarantined' "
            "AND raw = ? AND written = 1 LIMIT 1",
            storable((key.session_id, key.name, raw)),
        ).fetchone() is not None

    # -- retention ------------------------------------------------------------------------------

    def prune(self, cutoff: float | None, max_rows: int | None, *, dry: bool = False) -> int:
        """Delete (`dry`: count) the rows older than `cutoff` and those beyond the newest `max_rows`;
        a verdict not yet known written is never pruned (one that ended unwritten, its child gone, is)."""
        keep = "NOT (response IS NOT NULL AND written IS NULL AND ended_at IS NULL)"
        verb = "SELECT COUNT(*) FROM asks" if dry else "DELETE FROM asks"

        def run(sql: str, params: tuple[object, ...]) -> int:
            cursor = self.conn.execute(f"{verb} WHERE {sql} AND {keep}", params)
            return int(cursor.fetchone()[0]) if dry else cursor.rowcount

        removed = 0
        if cutoff is not None:
            removed += run("arrived_at < ?", (cutoff,))
        if max_rows is not None and dry:
            newest = "id IN (SELECT id FROM asks ORDER BY arrived_at DESC, id DESC LIMIT -1 OFFSET ?)"
            if cutoff is not None:
                newest += " AND arrived_at >= ?"  # not counted twice
                removed += run(newest, (max_rows, cutoff))
            else:
                removed += run(newest, (max_rows,))
        elif max_rows is not None:
            beyond = self._count_beyond(max_rows)
            if beyond > 0:  # the oldest rows past the newest `max_rows`: the same rows, walked from their end
                removed += run("id IN (SELECT id FROM asks ORDER BY arrived_at, id LIMIT ?)", (beyond,))
        return removed

    def _count_beyond(self, max_rows: int) -> int:
        """How many rows the table holds beyond `max_rows`. Pruning runs every few hundred new rows
        (in a burst too): a table whose ids span no more than `max_rows` cannot hold more, which two
        index lookups tell; else the rows are counted (a walk of the table's smallest index, a quarter
        of the cost of skipping the newest `max_rows` in `arrived_at` order, as this did)."""
        span = self.conn.execute(
            "SELECT (SELECT MAX(id) FROM asks) - (SELECT MIN(id) FROM asks)").fetchone()[0]
        if span is None or span < max_rows:
            return 0
        count: int = self.conn.execute("SELECT COUNT(*) FROM asks").fetchone()[0]
        return count - max_rows

    # -- reading --------------------------------------------------------------------------------

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, VerdictRow]:
        """The verdicts recorded for these requests, by id (ids are unique per ask; the newest wins)."""
        found: dict[str, VerdictRow] = {}
        ids = list(dict.fromkeys(request_ids))
        odd = self.odd(session_id) if ids else False
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            for request_id, body, written, outcome, ended, decided_at in self.conn.execute(
                "SELECT request_id, response, written, outcome, ended_at IS NOT NULL, decided_at FROM asks "
                f"WHERE {by_ids(len(chunk), odd)} AND served_session = ? AND response IS NOT NULL "
                "ORDER BY id",
                (*id_params(chunk, session_id if odd else None), session_id),
            ):
                found[request_id] = VerdictRow(body, bool(written), outcome, bool(ended), decided_at)
        return found

    def ids(self, clause: str, params: Sequence[object], limit: int | None) -> list[int]:
        """The ids of the rows matching a filter's `clause` (`HistoryFilter.where`), newest first."""
        sql = f"SELECT id FROM asks{clause} ORDER BY arrived_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params = [*params, limit]
        return [r[0] for r in self.conn.execute(sql, params)]

    def rows(self, ids: Sequence[int]) -> dict[int, HistoryRow]:
        """The rows with these ids, by id."""
        marks = ", ".join("?" for _ in ids)
        found = self.conn.execute(f"{SELECT_ROWS} WHERE id IN ({marks})", tuple(ids))
        return {r[0]: HistoryRow(*r) for r in found}

    def summary_groups(
        self, clause: str, params: Sequence[object]
    ) -> list[tuple[str | None, int, int, int, int, int]]:
        """Per agent of the matching rows: rows, decided, approved, withdrawn, decided by the person
        (with a time)."""
        return self.conn.execute(
            "SELECT agent, COUNT(*), COUNT(verdict), "
            "COUNT(CASE WHEN verdict IN ('approved', 'approved_for_session') THEN 1 END), "
            "COUNT(CASE WHEN outcome = 'withdrawn' THEN 1 END), "
            "COUNT(CASE WHEN outcome IN ('user', 'user_grant') AND decide_ms IS NOT NULL THEN 1 END) "
            f"FROM asks{clause} GROUP BY agent",
            params,
        ).fetchall()

    def person_ms_at(self, clause: str, params: Sequence[object], offset: int) -> float:
        """The `offset`-th smallest time the person took among the matching rows (the median's)."""
        joiner = " AND " if clause else " WHERE "
        found: float = self.conn.execute(
            f"SELECT decide_ms FROM asks{clause}{joiner}outcome IN ('user', 'user_grant') "
            "AND decide_ms IS NOT NULL ORDER BY decide_ms LIMIT 1 OFFSET ?",
            [*params, offset],
        ).fetchone()[0]
        return found

    def distinct(self, column: str) -> list[str]:
        """Values seen in one column (the caller names only filterable columns)."""
        sql = f"SELECT DISTINCT {column} FROM asks WHERE {column} IS NOT NULL ORDER BY 1"
        return [r[0] for r in self.conn.execute(sql)]


def _runs(ordered: Sequence[int]) -> list[tuple[int, int]]:
    """The runs of consecutive ids in sorted `ordered` (not empty), each as its first and last."""
    ends = [at for at in range(1, len(ordered)) if ordered[at] != ordered[at - 1] + 1]
    return [(ordered[a], ordered[b - 1]) for a, b in zip([0, *ends], [*ends, len(ordered)], strict=True)]
