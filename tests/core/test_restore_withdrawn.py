"""A verdict an earlier run recorded and never saw written (killed between its link and its note, or
before the link) is published by the next run as recorded, unless its child is gone meanwhile
(campaign3, finding 5). A pi child reads its response, deletes it, then deletes its request: a restart
that reads the request in between finds no response and must not publish the verdict again once the
request is gone (a second response under the name, read by nobody, its row saying it was written).
Answers published at once look just before placing (`Publisher._drop_withdrawn`); this is the same
look on the restart's path."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from core.history import HistoryStore
from core.serving.verdicts import VerdictRecord, gate_denial
from core.testing import GatedDisk, ManualClock
from core.vocabulary.asks import AskKey, DenyingArbiter
from core.wire.reader import parse_request
from core.wire.response import encode_response
from tests.helpers import Served, needs_inotify, request_body, response_path, session_dir, wait_for
from tests.history.support import S


@needs_inotify
async def test_a_recorded_verdict_is_not_published_after_a_restart_once_its_request_is_gone(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1_800_000_000.0)
    raw = json.dumps(request_body("x", S)).encode()
    store = HistoryStore.in_state_dir(tmp_path / "state")
    response = gate_denial(S, clock, "no person is attending")
    # What an earlier run left: the verdict recorded, never noted written (the child read it and
    # deleted the response; its request is still there, for a moment).
    store.record_verdicts([VerdictRecord(AskKey(S, "x.json"), parse_request(raw), response,
                                         encode_response(response), "fail-safe", None, clock.wall(), raw)])
    requests = session_dir(tmp_path / "root", S) / "requests"
    requests.mkdir(parents=True)
    (requests / "x.json").write_bytes(raw)
    disk = GatedDisk()
    try:
        async with Served(tmp_path, DenyingArbiter(clock), ledger=store, clock=clock, writer=disk) as served:
            served.core.subscribe(store.observe)
            await asyncio.to_thread(disk.entered.wait, 30)  # the restart publishes the recorded verdict
            (requests / "x.json").unlink()  # ... as its child deletes its request
            disk.gate.set()
            placed = response_path(served.root, S, "x").exists
            await wait_for(lambda: placed() or "withdrawn" in served.kinds(), what="the restore done")
            stray = placed()
        assert not stray, "a response published after its child deleted its request (read by nobody)"
        assert [r.written for r in store.query()] != [1]
    finally:
        store.close()
