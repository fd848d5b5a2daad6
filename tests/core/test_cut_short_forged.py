"""An empty (or cut-short) response someone else planted while this node's answer waited for the disk
is not this node's answer (campaign3, finding 6). A recorded verdict whose response is found cut
short is taken for this node's own, flushed no further before a crash (`take_in`'s `or_cut_short`),
and noted delivered. Here this node never placed one: its write was refused (a full disk) and the
ask waits to be written; an empty file planted meanwhile must be set aside as forged, not noted as
this node's delivered approval (the child reads an empty file, a denial for a pi child)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from core.history import HistoryStore
from core.testing import FailingDisk, ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import Served, needs_inotify, rescanned_until, response_path, wait_for, write_request
from tests.history.support import S


@needs_inotify
async def test_an_empty_response_planted_while_the_answer_waits_for_the_disk_is_not_noted_as_ours(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1_800_000_000.0)
    store = HistoryStore.in_state_dir(tmp_path / "state")
    disk = FailingDisk(errno.ENOSPC, failures=4)  # the first try and its three retries
    try:
        async with Served(tmp_path, DenyingArbiter(clock), ledger=store, clock=clock, writer=disk) as served:
            served.core.subscribe(store.observe)
            write_request(served.root, S, "x")
            await wait_for(lambda: "answer_failed" in served.kinds(), what="the answer waiting for the disk")
            planted = response_path(served.root, S, "x")
            os.close(os.open(planted, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # someone else's, empty
            settled = lambda: any(r.written is not None for r in store.query()) or "forged" in served.kinds()  # noqa: E731
            await rescanned_until(clock, settled, what="the waiting answer served again")
            kinds = served.kinds()
        assert [r.written for r in store.query() if r.request_id == "x"] != [1], "noted as this node's"
        assert "forged" in kinds
    finally:
        store.close()
