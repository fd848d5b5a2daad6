"""A burst's verdict joins its still-queued arrival in one row: the same rows as writing each arrival
first and then updating it (the one-by-one path), on real SQLite files."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import asdict
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.history.transactions import ARRIVALS_WAIT_S
from core.seams import Seams
from core.serving import ServeEvent
from core.serving.asks import AskKey
from core.serving.publisher import VerdictRecord
from core.testing import ManualClock
from core.wire.decisions import RuleDecision
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response
from tests.helpers import wait_for

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
