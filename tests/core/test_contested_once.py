"""Beside another server (issue 32, finding 4): its answers to asks this node never judged are its own
business (no `contested` line, event or row), and an ask this node answered that the other server
answers too is said contested once, in one line and one row, however often its temp files are seen."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import (
    Served,
    needs_inotify,
    read_response_when_written,
    rescanned_until,
    response_path,
    wait_for,
    write_request,
)
from tests.history.support import S


def contested_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if " contested: " in r.getMessage()]


@needs_inotify
async def test_contested_is_said_once_and_only_for_asks_this_node_judged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, other: subprocess.Popen[bytes]
) -> None:
    caplog.set_level(logging.INFO, "pi_authorizer")
    clock = ManualClock(1_800_000_000.0)
    store = HistoryStore.in_state_dir(tmp_path / "state")
    try:
        async with Served(tmp_path, DenyingArbiter(clock), ledger=store, clock=clock) as served:
            served.core.subscribe(store.observe)
            write_request(served.root, S, "mine")
            await read_response_when_written(served.root, S, "mine")
            noted = lambda: any(r.written == 1 for r in store.query())  # noqa: E731
            await wait_for(noted, what="this node's answer noted")
            responses = response_path(served.root, S, "mine").parent
            # The other server answers twenty asks this node never saw (its own children's) ...
            for n in range(20):
                temp = responses / f"theirs-{n}.json.{other.pid}.18000000000{n:02d}.tmp"
                temp.write_text(json.dumps({"approved": True, "state": "approved"}))
                temp.rename(responses / f"theirs-{n}.json")
            # ... and writes over this node's answer, three times (a retry, a second publish).
            for n in range(3):
                temp = responses / f"mine.json.{other.pid}.17000000000{n:02d}.tmp"
                temp.write_text(json.dumps({"approved": True, "state": "approved"}))
                temp.unlink()
            await rescanned_until(clock, lambda: "contested" in served.kinds(), what="the contest said")
            for _ in range(3):
                clock.advance(1.0)
                await served.core.rescan_all()
            assert [e.key.name for e in served.events if e.kind == "contested"] == ["mine.json"]
            assert len(contested_lines(caplog)) == 1, contested_lines(caplog)
        rows = store.query()
        assert [r.request_id for r in rows if r.outcome == "contested"] == ["mine"]
        assert all(r.request_id == "mine" for r in rows if r.request_id is not None)
    finally:
        store.close()
