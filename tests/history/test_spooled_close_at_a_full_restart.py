"""A restart whose history still cannot write (the disk still full) holds an earlier run's fail-safe
closes only in its queue (loaded from the spool, not written). The intake's lookup of recorded
verdicts (`HistoryStore.recorded_verdicts`) reads a connection of its own, which never sees the queue:
a request file the stop left behind, whose child already read the fail-safe denial, is then judged
again (a second answer under a used id) or, its response still there, called forged (our own denial
reported as someone else's). The queued closes now count as recorded (`HistoryWriter.queued_closes`).
Review of ea45d2e (the packed spool); the gap is older than it.

A real serving core, real files and the real SQLite history; the history fails through its fault seam.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.person import Person
from core.seams import Seams
from core.serving import ServingCore
from core.testing import Breakable
from tests.helpers import response_path, serve_until_the_fail_safe, wait_for, write_request
from tests.history.support import S, intent


class FullAfterOpen:
    """The history's fault hook for a start on a disk still full: the open's prune (nothing to delete,
    so nothing written on a real full disk) passes; every later write transaction fails."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, stage: str) -> None:
        if stage == "history":
            self.calls += 1
            if self.calls > 1:
                raise sqlite3.OperationalError("database or disk is full")


@pytest.mark.parametrize("response", ["read and deleted by the child", "still there"])
async def test_a_request_left_by_a_stop_is_not_answered_again_while_its_fail_safe_close_is_queued(
    tmp_path: Path, response: str, caplog: pytest.LogCaptureFixture
) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    fault = Breakable()
    first = HistoryStore.in_state_dir(state, seams=Seams(fault=fault))
    await serve_until_the_fail_safe(root, first, fault)  # the child read the fail-safe denial of `p`
    first.close()  # still failing: the close is spooled
    # The stop came between linking the denial and removing its request: the request is still there.
    request = write_request(root, S, "p", accessIntent=intent("bash", "make test"))
    if response != "still there":
        response_path(root, S, "p").unlink()  # a pi child deletes its response, then its request
    again = HistoryStore.in_state_dir(state, seams=Seams(fault=FullAfterOpen()))
    person = Person()
    core = ServingCore(root, state, person, ledger=again, seams=Seams(retry_delays=(0.0, 0.0, 0.0)))
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        # Served: removed (answered before the restart), set aside as a used id (once the disk allows:
        # it waits for it), called forged, or put to the person.
        said = ("waiting for disk", "FORGED RESPONSE")
        await wait_for(lambda: bool(person.pending()) or not request.exists()
                       or any(words in caplog.text for words in said), what="the request served")
        assert not person.pending(), "the used id was judged again: put before the person a second time"
        assert "FORGED RESPONSE" not in caplog.text, "our own fail-safe denial called forged"
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
        again.close()
