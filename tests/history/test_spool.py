"""A history still failing at exit keeps what it could not write for the next start (red-team finding 4).

The ledger refused the person's verdict, the child got the fail-safe denial, and the history was
still failing when the node stopped: the row's close (`fail-safe`) used to be lost, and the next start
took the row (pending, its request file gone) for a withdrawal. The real SQLite store fails through
its fault seam; the next start is a new store on the same state dir.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.history.spool import spool_name
from core.person import DecisionRefused, HumanAuthorizer
from core.seams import Seams
from core.serving import ServingCore
from core.testing import Breakable
from tests.helpers import read_response_when_written, wait_for, write_request
from tests.history.support import S, intent


async def serve_until_the_fail_safe(root: Path, store: HistoryStore, fault: Breakable) -> None:
    human = HumanAuthorizer()
    core = ServingCore(root, store.path.parent, human, ledger=store, retry_delays=(0.0, 0.0, 0.0))
    core.subscribe(store.observe)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        write_request(root, S, "p", accessIntent=intent("bash", "make test"))
        await wait_for(lambda: bool(human.pending()), what="pending ask")
        await wait_for(lambda: [r.outcome for r in store.query()] == ["pending"], what="arrival row")
        fault.broken = True
        with pytest.raises(DecisionRefused, match="history could not record"):
            await human.approve_once(human.pending()[0].key)
        body = await read_response_when_written(root, S, "p")
        assert body["decidedBy"]["kind"] == "gate_error"
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)


async def test_a_fail_safe_close_the_history_could_not_write_by_exit_is_written_at_the_next_start(
    tmp_path: Path,
) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    fault = Breakable()
    store = HistoryStore.in_state_dir(state, seams=Seams(fault=fault))
    await serve_until_the_fail_safe(root, store, fault)
    store.close()  # still failing: what it could not write is kept beside it
    again = HistoryStore.in_state_dir(state)  # the next start, the history healed
    try:
        assert again.reconcile_open(S, set()) == 0  # it used to close the row as withdrawn
        [row] = again.query()
        assert row.outcome == "fail-safe" and row.verdict == "denied_with_reason" and row.written == 1
        assert row.reason is not None and "history could not record" in row.reason
        assert not (state / spool_name(store.path)).exists()
    finally:
        again.close()
    replayed = HistoryStore.in_state_dir(state)  # nothing is written twice
    try:
        assert [r.outcome for r in replayed.query()] == ["fail-safe"]
    finally:
        replayed.close()
