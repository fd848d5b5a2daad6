"""A verdict recorded whose response could not be written (red-team findings 2 and 3).

- The child withdraws an ask whose answer could not be written (a rule's or the fail-safe's, or a
  person's): it was never answered, and the history says so (`withdrawn`, no verdict the child got)
  instead of keeping a decided row that never ends.
- The person decides again after their first decision could not be written: one row for the ask,
  holding the verdict the child received, never two decisions.

A real serving core, real files and the real SQLite history; the disk fails through the `DiskWriter`
seam and the publisher is held at its `staged` fault point.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import time
from pathlib import Path

import pytest

from core.history import HistoryStore, Retention
from core.person import DecisionRefused, HumanAuthorizer
from core.serving import ServeEvent
from core.serving.asks import DenyingArbiter
from core.testing import FailingDisk, HeldDisk
from tests.helpers import (
    Served,
    read_response_when_written,
    response_path,
    session_dir,
    wait_for,
    write_request,
)
from tests.history.support import S


def one_row(store: HistoryStore, request_id: str) -> tuple[str, str | None, int | None, str | None]:
    rows = [r for r in store.query() if r.request_id == request_id]
    assert len(rows) == 1, [(r.outcome, r.verdict, r.written) for r in rows]
    row = rows[0]
    assert row.ended_at is not None
    return row.outcome, row.verdict, row.written, row.reason


async def test_a_fail_safe_answer_not_written_then_withdrawn_is_withdrawn(tmp_path: Path) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    disk = FailingDisk(errno.ENOSPC, failures=-1)
    async with Served(tmp_path, DenyingArbiter(), ledger=store, writer=disk) as served:
        served.core.subscribe(store.observe)
        request = session_dir(served.root, S) / "requests" / "gone.json"

        def child_gives_up(event: ServeEvent) -> None:  # at the moment its answer fails to be written
            if event.kind == "answer_failed":
                request.unlink(missing_ok=True)

        served.core.subscribe(child_gives_up)
        write_request(served.root, S, "gone")
        await wait_for(lambda: "answer_failed" in served.kinds(), what="the failed write")
        await served.core.rescan_all()
        await wait_for(lambda: "withdrawn" in served.kinds(), what="the withdrawal reported")
    outcome, verdict, written, reason = one_row(store, "gone")
    assert (outcome, verdict, written) == ("withdrawn", None, None)
    assert reason is not None and "could not be written" in reason
    assert not response_path(served.root, S, "gone").exists()
    assert store.reconcile_open(S, set()) == 0  # the next start finds nothing left open
    store.close()


async def test_a_persons_answer_withdrawn_while_it_failed_to_be_written_is_withdrawn(tmp_path: Path) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    disk = HeldDisk(errno.ENOSPC, failures=-1)
    human = HumanAuthorizer()
    async with Served(tmp_path, human, ledger=store, writer=disk, fault=disk.fault) as served:
        served.core.subscribe(store.observe)
        request = write_request(served.root, S, "left")
        await wait_for(lambda: bool(human.pending()), what="the ask in front of the person")
        approving = asyncio.ensure_future(human.approve_once(human.pending()[0].key))
        try:
            await wait_for(disk.entered.is_set, what="the decision's batch held")
            request.unlink()  # the child gives up while its answer is being written
            await served.core.rescan_all()
        finally:
            disk.release.set()
        with contextlib.suppress(DecisionRefused):  # refused, or told the child withdrew
            await asyncio.wait_for(approving, 30)
        await wait_for(lambda: "withdrawn" in served.kinds(), what="the withdrawal reported")
        assert not human.pending()
    assert one_row(store, "left")[:3] == ("withdrawn", None, None)
    store.close()


async def test_a_person_deciding_again_after_a_failed_write_leaves_one_row(tmp_path: Path) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    disk = FailingDisk(errno.EIO, failures=4)  # the batch's attempt and its three retries
    human = HumanAuthorizer()
    async with Served(tmp_path, human, ledger=store, writer=disk) as served:
        served.core.subscribe(store.observe)
        write_request(served.root, S, "twice")
        await wait_for(lambda: bool(human.pending()), what="the ask in front of the person")
        key = human.pending()[0].key
        with pytest.raises(DecisionRefused, match="writing the response failed"):
            await human.approve_once(key)
        await human.deny(key, "no after all")
        body = await read_response_when_written(served.root, S, "twice")
        assert body["denialReason"] == "no after all"
        await wait_for(lambda: one_row_written(store, "twice"), what="the answer marked written")
    outcome, verdict, written, reason = one_row(store, "twice")
    assert (outcome, verdict, written, reason) == ("user", "denied_with_reason", 1, "no after all")
    assert [r.verdict for r in store.query()] == ["denied_with_reason"]  # the review lists one decision
    store.close()


def one_row_written(store: HistoryStore, request_id: str) -> bool:
    return any(r.written == 1 for r in store.query() if r.request_id == request_id)


def test_a_row_that_ended_unanswered_is_pruned_like_any_other(tmp_path: Path) -> None:
    """Rows whose verdict is not known written are kept from pruning, but not once the ask ended."""
    now = time.time()
    store = HistoryStore(tmp_path / "history.sqlite3", Retention(max_age_s=3600, max_rows=None, every=10**9))
    old = {"served_session": S, "arrived_at": now - 7200, "response": b"{}", "written": None}
    store.insert_rows([
        {**old, "request_name": "ended.json", "outcome": "withdrawn", "ended_at": now - 7000},
        {**old, "request_name": "open.json", "outcome": "user", "verdict": "approved"},
    ])
    assert store.prune(now) == 1
    assert [r.request_name for r in store.query()] == ["open.json"]
    store.close()
