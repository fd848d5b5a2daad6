"""When the history or a response cannot be written, every ask still ends once and the history says how.

- A verdict the history refused: the child is denied for safety, and the row is closed as `fail-safe`
  once the history works again (never left `pending` for the next start to call `withdrawn`).
- A history still failing at exit keeps what it could not write beside it, and the next start writes
  it (red-team finding 4): the row's `fail-safe` close used to be lost, and the next start took the
  row (pending, its request file gone) for a withdrawal.
- A verdict recorded whose response could not be written (red-team findings 2 and 3): the child
  withdraws an ask whose answer could not be written (a rule's or the fail-safe's, or a person's): it
  was never answered, and the history says so (`withdrawn`, no verdict the child got) instead of
  keeping a decided row that never ends; the person decides again after their first decision could
  not be written: one row for the ask, holding the verdict the child received, never two decisions.

A real serving core, real files and the real SQLite history; the history fails through its fault
seam, the disk through the `DiskWriter` seam, and the publisher is held at its `staged` fault point.
Nothing is patched.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import time
from pathlib import Path

import pytest

from core.history import HistoryStore, Retention
from core.history.spool import spool_name
from core.person import DecisionRefused, Person
from core.seams import Seams
from core.serving import ServingCore
from core.testing import Breakable, FailingDisk, HeldDisk
from core.vocabulary.asks import DenyingArbiter
from core.vocabulary.events import ServeEvent
from tests.helpers import (
    Served,
    in_private_mounts,
    read_response_when_written,
    response_path,
    serve_until_the_fail_safe,
    session_dir,
    wait_for,
    write_request,
)
from tests.history.support import S, intent


async def test_a_refused_verdict_is_closed_as_fail_safe_once_the_history_works(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    fault = Breakable()
    store = HistoryStore.in_state_dir(state, seams=Seams(fault=fault))
    person = Person()
    core = ServingCore(root, state, person, ledger=store, seams=Seams(retry_delays=(0.0, 0.0, 0.0)))
    core.subscribe(store.observe)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        write_request(root, S, "p", accessIntent=intent("bash", "make test"))
        await wait_for(lambda: bool(person.pending()), what="pending ask")
        await wait_for(lambda: [r.outcome for r in store.query()] == ["pending"], what="arrival row")
        fault.broken = True
        with pytest.raises(DecisionRefused, match="history could not record"):
            await person.approve_once(person.pending()[0].key)
        body = await read_response_when_written(root, S, "p")
        assert body["state"] == "denied_with_reason" and body["decidedBy"]["kind"] == "gate_error"
        reader = store.reader()  # its own connection: reads while the store's writes still fail
        try:
            assert [r.outcome for r in reader.query()] == ["pending"]
        finally:
            reader.close()
        fault.broken = False  # the history works again: the next transaction closes the row (the
        # worker's, or a read's once `READ_AFTER_REFUSAL_S` passed since the refused one)
        await wait_for(lambda: store.query()[0].outcome != "pending", what="the row closed")
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


async def test_a_fail_safe_close_the_history_could_not_write_by_exit_is_written_at_the_next_start(
    tmp_path: Path,
) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    fault = Breakable()
    store = HistoryStore.in_state_dir(state, seams=Seams(fault=fault))
    refused = await serve_until_the_fail_safe(root, store, fault)
    assert refused is not None and "history could not record" in str(refused)
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
    person = Person()
    async with Served(tmp_path, person, ledger=store, writer=disk, fault=disk.fault) as served:
        served.core.subscribe(store.observe)
        request = write_request(served.root, S, "left")
        await wait_for(lambda: bool(person.pending()), what="the ask in front of the person")
        approving = asyncio.ensure_future(person.approve_once(person.pending()[0].key))
        try:
            await wait_for(disk.entered.is_set, what="the decision's batch held")
            request.unlink()  # the child gives up while its answer is being written
            await served.core.rescan_all()
        finally:
            disk.release.set()
        with contextlib.suppress(DecisionRefused):  # refused, or told the child withdrew
            await asyncio.wait_for(approving, 30)
        await wait_for(lambda: "withdrawn" in served.kinds(), what="the withdrawal reported")
        assert not person.pending()
    assert one_row(store, "left")[:3] == ("withdrawn", None, None)
    store.close()


async def test_a_person_deciding_again_after_a_failed_write_leaves_one_row(tmp_path: Path) -> None:
    """The person's decision is recorded before its write fails: it waits for the disk and is
    published as recorded (issue 21); it cannot be decided a second time, so one verdict row stays."""
    store = HistoryStore.in_state_dir(tmp_path / "state")
    disk = FailingDisk(errno.EIO, failures=4)  # the batch's attempt and its three retries
    person = Person()
    async with Served(tmp_path, person, ledger=store, writer=disk) as served:
        served.core.subscribe(store.observe)
        write_request(served.root, S, "twice")
        await wait_for(lambda: bool(person.pending()), what="the ask in front of the person")
        key = person.pending()[0].key
        with pytest.raises(DecisionRefused, match="waiting for disk"):
            await person.approve_once(key)
        with pytest.raises(DecisionRefused, match="no longer pending"):
            await person.deny(key, "no after all")
        body = await read_response_when_written(served.root, S, "twice")
        assert body["approved"] is True and body["decidedBy"]["kind"] == "user"
        await wait_for(lambda: one_row_written(store, "twice"), what="the answer marked written")
    outcome, verdict, written, _ = one_row(store, "twice")
    assert (outcome, verdict, written) == ("user", "approved", 1)
    assert [r.verdict for r in store.query()] == ["approved"]  # the review lists one decision
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


def test_a_fail_safe_close_is_kept_when_the_state_dirs_disk_is_full_at_exit(tmp_path: Path) -> None:
    """Finding 7: the history still failing at exit on a really full disk (a tmpfs in a private mount
    namespace): the spool is written into the space reserved beside the history, and the next start
    closes the row `fail-safe` (it used to say `withdrawn`)."""
    said = in_private_mounts(["-m", "tests.history.full_disk_exit", str(tmp_path)], 120)
    assert said == {"outcomes": ["fail-safe"]}
