"""The history file on real SQLite: schema migrations from an old file, retention pruning, filters and
the summary; and the write queue: a burst's verdict joins its still-queued arrival in one row, the
same rows as writing each arrival first, and the delayed worker writes only the arrivals that waited."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.history import VERSION, HistoryFilter, HistoryStore, HistoryTooNew, Retention, migrate
from core.history.store import HISTORY_FILE
from core.history.transactions import ARRIVALS_WAIT_S
from core.seams import Seams
from core.serving.verdicts import VerdictRecord
from core.testing import ManualClock
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.decisions import RuleDecision
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response
from tests.helpers import wait_for


def row(n: int, at: float, **values: object) -> dict[str, object]:
    base: dict[str, object] = {
        "served_session": "s",
        "request_name": f"r{n}.json",
        "request_id": f"r{n}",
        "arrived_at": at,
        "outcome": "rule",
        "agent": "Explore",
        "surface": "bash",
        "value": f"ls {n}",
        "verdict": "approved",
        "response": b"{}",
        "written": 1,
    }
    base.update(values)
    return base


def test_a_version_1_file_is_migrated_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=1) == 1
    conn.execute(
        "INSERT INTO asks (served_session, request_name, request_id, arrived_at, outcome, verdict) "
        "VALUES ('s', 'old.json', 'old', ?, 'user', 'approved')",
        (time.time(),),
    )
    conn.close()
    store = HistoryStore(path)
    [old] = store.query()
    assert (old.request_id, old.source, old.import_key) == ("old", "served", None)
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == VERSION == 4
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_a_current_file_runs_nothing(tmp_path: Path) -> None:
    HistoryStore(tmp_path / HISTORY_FILE).insert_rows([row(1, time.time())])
    assert len(HistoryStore(tmp_path / HISTORY_FILE).query()) == 1


def test_a_file_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    sqlite3.connect(path).execute(f"PRAGMA user_version = {VERSION + 1}")
    with pytest.raises(HistoryTooNew):
        HistoryStore(path)


def test_the_file_is_private(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "state" / HISTORY_FILE)
    assert store.path.stat().st_mode & 0o077 == 0


def test_pruning_by_age_and_count_keeps_unpublished_verdicts(tmp_path: Path) -> None:
    now = time.time()
    store = HistoryStore(tmp_path / HISTORY_FILE, Retention(max_age_s=3600, max_rows=3, every=10**9))
    store.insert_rows(
        [row(1, now - 7200), row(2, now - 7200, written=None)] + [row(n, now - n) for n in range(3, 8)]
    )
    assert store.prune(now) == 3  # r1 by age; r7, r6 by count (the oldest of the rest)
    kept = [r.request_id for r in store.query()]
    assert kept == ["r3", "r4", "r5", "r2"]  # r2's verdict is not known published: kept


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=14), st.integers(0, 10),
       st.integers(0, 6))
def test_pruning_by_count_removes_exactly_the_rows_past_the_newest(
    tmp_path: Path, rows_drawn: list[tuple[int, bool]], max_rows: int, gaps: int
) -> None:
    """The rows pruned by count are those past the newest `max_rows` in `arrived_at` order (ties by id),
    but for a verdict not known written: whatever the ids' gaps (rows deleted before) and ties."""
    path = tmp_path / f"prune-{time.monotonic_ns()}.sqlite3"
    store = HistoryStore(path, Retention(max_age_s=None, max_rows=None))
    store.insert_rows([row(n, 0.0) for n in range(gaps)] + [
        row(100 + n, float(at), **({} if written else {"written": None})) for n, (at, written) in
        enumerate(rows_drawn)])
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("DELETE FROM asks WHERE request_id NOT LIKE 'r1__'")  # the gaps: ids deleted before
        conn.commit()
        kept = {row_id for row_id, in conn.execute(
            "SELECT id FROM asks WHERE id NOT IN (SELECT id FROM asks ORDER BY arrived_at DESC, id DESC "
            "LIMIT -1 OFFSET ?) OR (response IS NOT NULL AND written IS NULL AND ended_at IS NULL)",
            (max_rows,))}
    removed = store.prune_with(Retention(max_age_s=None, max_rows=max_rows))
    with contextlib.closing(sqlite3.connect(path)) as conn:
        left = {row_id for row_id, in conn.execute("SELECT id FROM asks")}
    store.close()
    assert left == kept and removed == len(rows_drawn) - len(kept)


def test_pruning_runs_on_insert_every_n_rows(tmp_path: Path) -> None:
    now = time.time()
    store = HistoryStore(tmp_path / HISTORY_FILE, Retention(max_age_s=None, max_rows=5, every=4))
    for n in range(12):
        store.insert_rows([row(n, now + n)])
    assert 5 <= len(store.ids()) < 5 + 4


def test_filters_and_summary(tmp_path: Path) -> None:
    now = time.time()
    store = HistoryStore(tmp_path / HISTORY_FILE)
    store.insert_rows(
        [
            row(1, now - 10, outcome="user", decide_ms=4000.0),
            row(
                2, now - 9, outcome="user", verdict="denied_with_reason", reason="50% off_", decide_ms=1000.0
            ),
            row(3, now - 8, outcome="user", verdict="approved_for_session", decide_ms=9000.0, agent="Plan"),
            row(4, now - 7, outcome="withdrawn", verdict=None, response=None, written=None, surface="read"),
            row(5, now - 100_000, served_session="other", requester_session="child-9"),
        ]
    )

    def ids(**f: object) -> list[str | None]:
        return [r.request_id for r in store.query(HistoryFilter(**f))]  # type: ignore[arg-type]

    assert ids(agent="Plan") == ["r3"]
    assert ids(surface="read") == ["r4"]
    assert ids(verdict="approved") == ["r3", "r1", "r5"]
    assert ids(verdict="denied") == ["r2"]
    assert ids(verdict="withdrawn") == ["r4"]
    assert ids(session="child-9") == ids(session="other") == ["r5"]
    assert ids(text="50%") == ["r2"] and ids(text="0%_") == []  # LIKE wildcards are literal
    assert ids(text="LS 3") == ["r3"]
    assert ids(since=now - 1000) == ["r4", "r3", "r2", "r1"]
    summary = store.summary()
    assert summary.total == 5 and summary.per_agent == (("Explore", 4), ("Plan", 1))
    assert (summary.decided, summary.approved, summary.withdrawn) == (4, 3, 1)
    assert summary.median_person_ms == 4000.0 and summary.share_approved == 0.75
    assert store.summary(HistoryFilter(agent="nobody")).median_person_ms is None


S = "served"


def arrival(name: str, at: float) -> ServeEvent:
    raw = json.dumps({"id": name, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
                      "requesterAgentName": "Explore", "message": "m", "surface": "bash",
                      "value": f"git status {name}"}).encode()
    return ServeEvent("arrived", AskKey(S, f"{name}.json"), at, parsed=parse_request(raw), raw=raw)


def verdict(event: ServeEvent, allow: bool) -> VerdictRecord:
    assert event.parsed is not None
    rule = RuleDecision(surface="bash", pattern="git *", origin="global")
    response = (approve(responder=S, at_ms=5, decided_by=rule) if allow
                else deny(responder=S, at_ms=5, decided_by=None, reason="no rule allows it"))
    return VerdictRecord(event.key, event.parsed, response, encode_response(response), "rule")


def rows(store: HistoryStore) -> list[dict[str, object]]:
    found = [asdict(row) for row in store.query()]
    for values in found:
        del values["id"]
    return sorted(found, key=lambda values: (str(values["request_name"]), float(str(values["arrived_at"]))))


async def play(store: HistoryStore, clock: ManualClock, one_by_one: bool) -> None:
    """Arrivals a, b, c (a queued twice), then the verdicts of a and c; `b` stays pending. An open row
    for `c` exists from before (a restart): it is the row its verdict lands in."""
    store.observe(arrival("c", 1.0))
    store.write_arrivals()
    clock.advance(1)
    events = [arrival("a", 2.0), arrival("a", 2.5), arrival("b", 3.0), arrival("c", 3.5)]
    for event in events:
        store.observe(event)  # on a running loop: queued, not written yet
    clock.advance(2)
    if one_by_one:
        store.write_arrivals()
    store.record_verdicts([verdict(events[0], allow=True), verdict(events[3], allow=False)])
    store.write_arrivals()  # what the delayed worker writes: only `b`, the verdicts took the rest


@pytest.mark.asyncio
async def test_grouped_rows_equal_one_by_one(tmp_path: Path) -> None:
    stores = {}
    for one_by_one in (True, False):
        clock = ManualClock(wall=10.0)
        store = HistoryStore(tmp_path / f"{one_by_one}.sqlite3", seams=Seams(clock=clock))
        await play(store, clock, one_by_one)
        stores[one_by_one] = store
    grouped, reference = rows(stores[False]), rows(stores[True])
    assert grouped == reference
    assert [(r["request_name"], r["verdict"], r["outcome"]) for r in grouped] == [
        ("a.json", "approved", "rule"),
        ("b.json", None, "pending"),
        ("c.json", "denied_with_reason", "rule"),
    ]
    assert grouped[0]["decide_ms"] == pytest.approx((13.0 - 2.0) * 1000)
    assert grouped[0]["raw"] == arrival("a", 2.0).raw
    for store in stores.values():
        store.close()


def stored_names(path: Path) -> list[str]:
    """What the file holds now, read beside the store (a read through the store writes the queue)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return sorted(name for (name,) in conn.execute("SELECT request_name FROM asks"))


@pytest.mark.asyncio
async def test_the_delayed_worker_writes_only_arrivals_that_waited(tmp_path: Path) -> None:
    """In a burst the younger arrivals are left to their batches (one row with their verdict); one
    that waited `ARRIVALS_WAIT_S` (an ask at a person) is written by the worker alone."""
    clock = ManualClock(wall=10.0)
    path = tmp_path / "history.sqlite3"
    store = HistoryStore(path, seams=Seams(clock=clock))
    old, young = arrival("old", 10.0), arrival("young", 10.4)
    store.observe(old)
    store.observe(young)
    store.write_arrivals(until=10.0)  # the worker's pass at 10.5
    assert stored_names(path) == ["old.json"]
    store.record_verdicts([verdict(young, allow=True)])
    assert stored_names(path) == ["old.json", "young.json"]
    store.observe(arrival("late", clock.wall()))
    clock.advance(ARRIVALS_WAIT_S)  # the worker (armed since the first arrival) comes back for it
    await wait_for(lambda: stored_names(path) == ["late.json", "old.json", "young.json"], what="late")
    store.close()


def row_count(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM asks").fetchone()[0])


@pytest.mark.asyncio
async def test_an_arrival_whose_verdict_is_on_its_way_waits_for_it_however_long(tmp_path: Path) -> None:
    """A burst keeps decided asks queued behind earlier batches for longer than `ARRIVALS_WAIT_S`: their
    arrivals are still written with their verdicts, one insert each (not an insert, then an update)."""
    clock = ManualClock(wall=10.0)
    path = tmp_path / "history.sqlite3"
    store = HistoryStore(path, seams=Seams(clock=clock))
    decided, shown = arrival("decided", 10.0), arrival("shown", 10.0)
    store.observe(decided)
    store.observe(shown)
    store.expect(decided.key)
    store.write_arrivals(until=12.0)  # the worker's pass, long after both arrived
    assert stored_names(path) == ["shown.json"]  # the ask at a person, written alone
    store.record_verdicts([verdict(decided, allow=True)])
    [row] = [r for r in store.query() if r.request_name == "decided.json"]
    assert (row.verdict, row.outcome, row.raw) == ("approved", "rule", decided.raw)
    assert row_count(path) == 2
    # Recorded: nothing of it is expected any more, so a later arrival under that key is due as usual.
    later = arrival("decided", 20.0)
    store.observe(later)
    store.write_arrivals(until=21.0)
    assert row_count(path) == 3
    store.close()


@pytest.mark.asyncio
async def test_an_expected_arrival_whose_verdict_the_ledger_refused_is_written_with_its_fail_safe_answer(
    tmp_path: Path,
) -> None:
    """The ledger refused the verdict (the fail-safe denial went out unrecorded): the worker writes the
    arrival, then closes that one row as fail-safe; no second, pending row is left for it."""
    clock = ManualClock(wall=10.0)
    path = tmp_path / "history.sqlite3"
    store = HistoryStore(path, seams=Seams(clock=clock))
    event = arrival("refused", 10.0)
    store.observe(event)
    store.expect(event.key)
    denial = deny(responder=S, at_ms=5, decided_by=None, reason="the history could not record the verdict")
    store.observe(ServeEvent("answered", event.key, 10.2, event.parsed, denial, "fail-safe",
                             "the history could not record the verdict"))
    store.write_arrivals(until=11.0)
    [row] = store.query()
    assert (row.request_name, row.verdict, row.outcome) == ("refused.json", "denied_with_reason", "fail-safe")
    store.close()
    assert row_count(path) == 1
