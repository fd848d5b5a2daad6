"""A verdict's row known from its record: the written mark of a verdict recorded by this store goes to
that row by id (a burst's batch in one statement), and notes exactly what the look for each request's
newest row with a response notes (the way after a restart, when no row is known); a burst's rows
inserted as they are, or again made `storable` when SQLite refuses one, hold the same values."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.history import HistoryStore
from core.history.rows import VERDICT_ROW, storable, verdict_row
from core.history.schema import migrate
from core.history.table import LARGEST_ID, AsksTable
from core.seams import Seams
from core.serving.verdicts import VerdictRecord, WrittenMark
from core.testing import ManualClock
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.decisions import RuleDecision, UserDecision
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response

S = "019ff969-c34c-70be-9034-fae19c852932"
T = "another-session"
ALLOWED = approve(responder=S, at_ms=0, decided_by=RuleDecision(surface="bash", pattern="*", origin="g"))
DENIED = deny(responder=S, at_ms=0, decided_by=UserDecision(via="dialog"))


def raw_request(name: str, text: str = "") -> bytes:
    return json.dumps({"id": name, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
                       "requesterAgentName": "Explore", "message": f"run {name}{text}", "surface": "bash",
                       "value": name}).encode()


def at_once(session: str, name: str, at: float, text: str = "") -> VerdictRecord:
    """A verdict answered in its intake's trip (its row written whole: `arrived` and `raw`)."""
    raw = raw_request(name, text)
    response = ALLOWED if len(name) % 2 else DENIED
    return VerdictRecord(AskKey(session, f"{name}.json"), parse_request(raw), response,
                         encode_response(response), "rule", arrived=at, raw=raw)


def table(path: Path) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT * FROM asks ORDER BY id").fetchall()


# One step of a run: ("record", names), ("observe", name) an ask arrives and waits (a person's),
# ("decide", name) that ask's verdict, ("contest", name), ("mark", [(name, written, why)]).
NAMES = st.sampled_from([f"r{i}" for i in range(8)])
SESSIONS = st.sampled_from([S, T])
STEP = st.one_of(
    st.tuples(st.just("record"), st.lists(st.tuples(SESSIONS, NAMES), min_size=1, max_size=6)),
    st.tuples(st.just("observe"), st.tuples(SESSIONS, NAMES)),
    st.tuples(st.just("decide"), st.tuples(SESSIONS, NAMES)),
    st.tuples(st.just("contest"), st.tuples(SESSIONS, NAMES)),
    st.tuples(st.just("mark"), st.lists(
        st.tuples(st.tuples(SESSIONS, NAMES), st.booleans(), st.none() | st.just("why")), max_size=8)),
)


def run(path: Path, steps: list[tuple[str, object]], restart_before_marks: bool) -> list[tuple[object, ...]]:
    clock = ManualClock(wall=10.0)
    store = HistoryStore(path, seams=Seams(clock=clock))
    try:
        for kind, what in steps:
            clock.advance(1)
            now = clock.wall()
            if kind == "record":
                assert isinstance(what, list)
                store.record_verdicts([at_once(session, name, now) for session, name in what])
            elif kind in ("observe", "decide", "contest"):
                assert isinstance(what, tuple)
                session, name = what
                key = AskKey(session, f"{name}.json")
                if kind == "observe":
                    raw = raw_request(name)
                    store.observe(ServeEvent("arrived", key, now, parsed=parse_request(raw), raw=raw))
                elif kind == "decide":
                    verdict = at_once(session, name, now)
                    store.record_verdicts([VerdictRecord(key, verdict.parsed, verdict.response,
                                                         verdict.body, "user")])
                else:
                    store.observe(ServeEvent("contested", key, now, reason="another server answered"))
            else:
                assert isinstance(what, list)
                if restart_before_marks:  # no row known: each mark looks for its request's newest row
                    store.close()
                    store = HistoryStore(path, seams=Seams(clock=clock))
                store.mark_written([WrittenMark(AskKey(session, f"{name}.json"), name, written, why)
                                    for (session, name), written, why in what])
    finally:
        store.close()
    return table(path)


@settings(max_examples=150, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=12))
def test_marks_by_the_rows_recorded_note_what_the_look_for_the_newest_row_notes(
    steps: list[tuple[str, object]],
) -> None:
    """Batches recorded (a name again: decided again, or a new ask under it), asks waiting for a person
    and then decided, contested rows, marks plain, not written or with a why, repeated or of no row:
    the rows known from the record are the rows the look finds."""
    with tempfile.TemporaryDirectory() as folder:
        known = run(Path(folder) / "known.sqlite3", steps, restart_before_marks=False)
        looked = run(Path(folder) / "looked.sqlite3", steps, restart_before_marks=True)
    assert known == looked


def test_a_burst_is_marked_by_its_rows_in_one_statement(tmp_path: Path) -> None:
    """A batch's rows follow each other: its marks note that run of ids, and only it."""
    path = tmp_path / "history.sqlite3"
    store = HistoryStore(path, seams=Seams(clock=ManualClock(wall=10.0)))
    first = [at_once(S, f"a{i}", 10.0) for i in range(5)]
    second = [at_once(S, f"b{i}", 10.0) for i in range(5)]
    store.record_verdicts(first)
    store.record_verdicts(second)
    store.mark_written([WrittenMark(v.key, v.request_id, True) for v in second[1:]])
    store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        noted = conn.execute("SELECT request_name, written FROM asks ORDER BY id").fetchall()
    unmarked = [*(f"a{i}.json" for i in range(5)), "b0.json"]
    assert noted == [*((name, None) for name in unmarked), *((f"b{i}.json", 1) for i in range(1, 5))]


TEXT = st.text(max_size=4) | st.sampled_from(["\udc80", "x\ud800y", "é😀", "\x00"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=6))
def test_a_burst_inserted_as_it_is_stores_what_storable_rows_store(texts: list[tuple[str, str]]) -> None:
    """Names and messages with lone surrogates anywhere in a batch: the rows stored and their ids are
    those of each row inserted `storable`, one by one."""
    verdicts = [at_once(S, f"r{i}", 10.0) for i in range(len(texts))]
    rows: list[tuple[object, ...]] = []
    for verdict, (name, message) in zip(verdicts, texts, strict=True):
        columns = dict(zip(VERDICT_ROW, verdict_row(verdict, verdict.parsed, 10.0, None, 11.0), strict=True))
        columns["request_name"], columns["message"] = name, message
        rows.append(tuple(columns.values()))
    stored = []
    for one_by_one in (False, True):
        with contextlib.closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
            migrate(conn)
            asks = AsksTable(conn)
            conn.execute("BEGIN IMMEDIATE")
            asks.insert({"served_session": S, "request_name": "before", "arrived_at": 1.0, "outcome": "x"})
            if one_by_one:
                for one in rows:
                    conn.execute(f"INSERT INTO asks ({', '.join(VERDICT_ROW)}) VALUES "  # noqa: S608
                                 f"({', '.join('?' * len(VERDICT_ROW))})", storable(one))
            else:
                assert asks.insert_verdict_rows(rows) == 2
            conn.execute("COMMIT")
            stored.append(conn.execute("SELECT * FROM asks ORDER BY id").fetchall())
    assert stored[0] == stored[1]


def test_a_verdict_refused_after_its_row_was_held_is_marked_where_the_look_finds_it(tmp_path: Path) -> None:
    """Recorded (its row held), its answer not written, decided again (a row held) and then refused by
    the history, the fail-safe denial published in a row of its own: a mark then goes to the newest
    row with a response (the fail-safe's), never to the row held before the refusal, whose answer
    was never written."""
    path = tmp_path / "history.sqlite3"
    refusing: list[str] = []

    def fault(checkpoint: str) -> None:
        if checkpoint in refusing:
            raise sqlite3.OperationalError("disk I/O error")

    clock = ManualClock(wall=10.0)
    store = HistoryStore(path, seams=Seams(clock=clock, fault=fault))
    verdict = at_once(S, "r1", 10.0)
    store.record_verdicts([verdict])
    store.mark_written([WrittenMark(verdict.key, verdict.request_id, False, "the write failed")])
    store.record_verdicts([verdict])  # decided again: the same row, held again
    refusing.append("history")
    with contextlib.suppress(sqlite3.OperationalError):
        store.record_verdicts([verdict])
    refusing.clear()
    denial = deny(responder=S, at_ms=5, decided_by=None, reason="the history could not record the verdict")
    store.observe(ServeEvent("answered", verdict.key, 11.0, verdict.parsed, denial, "fail-safe",
                             "the history could not record the verdict"))
    store.mark_written([WrittenMark(verdict.key, verdict.request_id, True)])
    store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT outcome, written FROM asks ORDER BY id").fetchall()
    # the first write failed; the verdict decided again was never written; the fail-safe was
    assert rows == [("rule", 0), ("rule", None), ("fail-safe", 1)]


def test_a_verdict_whose_row_is_not_known_is_marked_where_the_look_finds_it(tmp_path: Path) -> None:
    """Found in review (F2): a request id used again once the table's ids reached SQLite's largest (a
    new row's id is then picked at random, so the record cannot say which row it wrote): the mark goes
    to the newest row with a response, as after a restart, never to the row held for the earlier ask
    (withdrawn, its answer never written)."""
    tables = []
    for restart in (False, True):
        path = tmp_path / f"history-{restart}.sqlite3"
        clock = ManualClock(wall=10.0)
        store = HistoryStore(path, seams=Seams(clock=clock))
        first = at_once(S, "r1", 10.0)
        store.record_verdicts([first])  # its row held
        store.observe(ServeEvent("withdrawn", first.key, 11.0))  # its child gave up before the link
        with contextlib.closing(sqlite3.connect(path)) as conn, conn:  # beside the store (WAL)
            conn.execute("INSERT INTO asks (id, served_session, request_name, outcome, arrived_at) "
                         "VALUES (?, 'x', 'x.json', 'pending', 1)", (LARGEST_ID,))
        if restart:  # no row held: the mark looks for the newest
            store.close()
            store = HistoryStore(path, seams=Seams(clock=clock))
        second = at_once(S, "r1", 12.0)  # the name used again: a new ask, a row whose id is not known
        store.record_verdicts([second])
        store.mark_written([WrittenMark(second.key, second.request_id, True)])
        store.close()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            tables.append(conn.execute("SELECT outcome, written FROM asks WHERE request_name = 'r1.json' "
                                       "ORDER BY arrived_at").fetchall())
    assert tables[0] == tables[1] == [("withdrawn", None), ("rule", 1)]
