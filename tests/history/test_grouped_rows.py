"""A burst's verdict joins its still-queued arrival in one row: the same rows as writing each arrival
first and then updating it (the one-by-one path), on real SQLite files."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from core.asks import AskKey
from core.clock import ManualClock
from core.history import HistoryStore
from core.publishing import VerdictRecord
from core.serving import ServeEvent
from core.wire.decisions import RuleDecision
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response

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
        store = HistoryStore(tmp_path / f"{one_by_one}.sqlite3", clock=clock)
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
