"""A verdict the history refused: the child is denied for safety, and the history says so once it
works again (the row is closed as `fail-safe`, never left `pending` for the next start to call
`withdrawn`). The real SQLite store fails through its fault seam; nothing is patched."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.person import DecisionRefused, HumanAuthorizer
from core.seams import Seams
from core.serving import ServingCore
from core.testing import Breakable
from tests.helpers import read_response_when_written, wait_for, write_request
from tests.history.support import S, intent


async def test_a_refused_verdict_is_closed_as_fail_safe_once_the_history_works(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    fault = Breakable()
    store = HistoryStore.in_state_dir(state, seams=Seams(fault=fault))
    human = HumanAuthorizer()
    core = ServingCore(root, state, human, ledger=store, retry_delays=(0.0, 0.0, 0.0))
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
        assert body["state"] == "denied_with_reason" and body["decidedBy"]["kind"] == "gate_error"
        reader = store.reader()  # its own connection: reads while the store's writes still fail
        try:
            assert [r.outcome for r in reader.query()] == ["pending"]
        finally:
            reader.close()
        fault.broken = False  # the history works again: the first transaction closes the row
        row = store.query()[0]
        assert row.outcome == "fail-safe" and row.verdict == "denied_with_reason"
        assert row.reason is not None and "history could not record" in row.reason
        assert row.written == 1 and row.ended_at is not None
        assert row.decider is not None and row.decider.startswith("gate error")
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
    # The next start: the request file is gone, and the row is not taken for a withdrawal.
    assert store.reconcile_open(S, set()) == 0
    assert [r.outcome for r in store.query()] == ["fail-safe"]
    store.close()
