"""A read of the history writes what is queued first; when the disk refuses that (full), the events
stay queued, the log says so, and the read answers from what is stored: before, every query raised
while the disk was full (a person's review of the history failed with it; the next start after a
stop on a full disk raised in its first query, campaign of issue 37's ninth pass)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.seams import Seams
from core.testing import Breakable
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from tests.history.support import S


def _arrival(rid: str, at: float) -> ServeEvent:
    raw = json.dumps({"id": rid, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
                      "requesterAgentName": "Explore", "message": "m", "surface": "bash",
                      "value": "ls"}).encode()
    return ServeEvent("arrived", AskKey(S, f"{rid}.json"), at, parse_request(raw), raw=raw)


async def test_a_read_on_a_full_disk_answers_from_what_is_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fault = Breakable()
    store = HistoryStore(tmp_path / "history.sqlite3", seams=Seams(fault=fault))
    try:
        store.observe(_arrival("stored", 1.0))
        assert [row.request_id for row in store.query()] == ["stored"]
        fault.broken = True  # the disk is full from here
        store.observe(_arrival("queued", 2.0))  # queued (a loop runs): written by the next transaction
        with caplog.at_level(logging.WARNING, logger="pi_authorizer.history"):
            assert [row.request_id for row in store.query()] == ["stored"]
        assert "could not be written before a read" in caplog.text
        fault.broken = False  # freed: the queued arrival is written by the next read, not lost
        assert sorted(row.request_id or "" for row in store.query()) == ["queued", "stored"]
    finally:
        store.close()
