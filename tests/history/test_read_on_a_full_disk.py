"""A read of the history writes what is queued first; when the disk refuses that (full), the events
stay queued, the log says so, and the read answers from what is stored: before, every query raised
while the disk was full (a person's review of the history failed with it; the next start after a
stop on a full disk raised in its first query, issue 37's ninth pass). For `READ_AFTER_REFUSAL_S`
after a refused write of the queue, reads do not try again: each page of the review screen rewrote
the whole queue, was refused, and held a batch's record meanwhile."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.history.transactions import READ_AFTER_REFUSAL_S
from core.seams import Seams
from core.testing import Breakable, ManualClock
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from tests.helpers import wait_for
from tests.history.support import S


class CountedBreakable(Breakable):
    """`Breakable`, counting the write transactions begun."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def __call__(self, stage: str) -> None:
        if stage == "history":
            self.writes += 1
        super().__call__(stage)


def _arrival(rid: str, at: float) -> ServeEvent:
    raw = json.dumps({"id": rid, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
                      "requesterAgentName": "Explore", "message": "m", "surface": "bash",
                      "value": "ls"}).encode()
    return ServeEvent("arrived", AskKey(S, f"{rid}.json"), at, parse_request(raw), raw=raw)


async def test_a_read_on_a_full_disk_answers_from_what_is_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fault, clock = CountedBreakable(), ManualClock()
    store = HistoryStore(tmp_path / "history.sqlite3", seams=Seams(fault=fault, clock=clock))
    try:
        store.observe(_arrival("stored", 1.0))
        assert [row.request_id for row in store.query()] == ["stored"]
        fault.broken = True  # the disk is full from here
        store.observe(_arrival("queued", 2.0))  # queued (a loop runs): written by the next transaction
        with caplog.at_level(logging.WARNING, logger="pi_authorizer.history"):
            assert [row.request_id for row in store.query()] == ["stored"]
        assert "could not be written before a read" in caplog.text
        tried = fault.writes
        for _ in range(5):  # a person paging the review screen: no write tried again meanwhile
            assert [row.request_id for row in store.query()] == ["stored"]
        assert fault.writes == tried
        fault.broken = False  # freed: the queued arrival is not lost
        assert [row.request_id for row in store.query()] == ["stored"]  # (not tried again yet)
        clock.advance(READ_AFTER_REFUSAL_S)
        assert sorted(row.request_id or "" for row in store.query()) == ["queued", "stored"]
    finally:
        store.close()


async def test_a_write_of_the_queue_that_succeeds_lets_reads_write_it_again(tmp_path: Path) -> None:
    """The back-off is for a refused write only: once a transaction wrote the queue, a read writes
    what was queued since before it answers."""
    fault, clock = CountedBreakable(), ManualClock()
    store = HistoryStore(tmp_path / "history.sqlite3", seams=Seams(fault=fault, clock=clock))
    try:
        fault.broken = True
        store.observe(_arrival("first", 1.0))
        assert store.query() == []
        fault.broken = False
        store.write_arrivals()  # the worker's transaction: written
        store.observe(_arrival("second", 2.0))
        assert sorted(row.request_id or "" for row in store.query()) == ["first", "second"]
    finally:
        store.close()


async def test_a_note_the_disk_refuses_is_written_by_the_worker_once_it_frees(tmp_path: Path) -> None:
    """With a loop running (serving), a withdrawal the disk refuses is queued, not raised into the
    loop (campaign10, finding 3), and the queue's worker writes it once the disk allows."""
    fault = CountedBreakable()
    store = HistoryStore(tmp_path / "history.sqlite3", seams=Seams(fault=fault))
    try:
        arrival = _arrival("a", 1.0)
        store.observe(arrival)
        assert [row.outcome for row in store.query()] == ["pending"]
        fault.broken = True
        store.observe(ServeEvent("withdrawn", arrival.key, 2.0, arrival.parsed))  # does not raise
        fault.broken = False
        await wait_for(lambda: [row.outcome for row in store.query()] == ["withdrawn"], what="the note")
    finally:
        store.close()


def test_what_the_person_was_shown_is_said_in_the_log_when_the_disk_refuses_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`mark_shown` and `mark_batch` are called from the app's message handlers, where an exception
    ends a Textual app: on a full disk they raised."""
    fault = CountedBreakable()
    store = HistoryStore(tmp_path / "history.sqlite3", seams=Seams(fault=fault))
    try:
        arrival = _arrival("a", 1.0)
        store.observe(arrival)
        fault.broken = True
        with caplog.at_level(logging.WARNING, logger="pi_authorizer.history"):
            store.mark_shown(arrival.key, 2.0)
            store.mark_batch(arrival.key, arrival.raw or b"", 3)
        assert "could not note when it was shown" in caplog.text
        assert "could not note that it was decided in a batch of 3" in caplog.text
        fault.broken = False
        store.mark_shown(arrival.key, 4.0)  # the disk back: noted as before
        assert [row.shown_at for row in store.query()] == [4.0]
    finally:
        store.close()
