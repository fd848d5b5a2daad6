"""Children withdrawing asks a person holds while a burst streams in are noticed by their file events
(campaign4, issue 37's fifth pass: the watcher gathers a burst's events for up to `GATHER_MAX_S` and
reads again when a read came back full). On a manual clock, so no safety rescan finds them instead:
each withdrawal reaches the person's queue (the arbiter), and a decision the person takes afterwards
on the others never answers a withdrawn ask nor records one as written."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

from core.seams import Seams
from core.serving import ServingCore
from core.testing import ManualClock, ScriptedArbiter
from core.vocabulary.asks import AskKey
from tests.core.support import ALLOW_LS, responses
from tests.helpers import needs_inotify, session_dir, wait_for, write_request
from tests.history.support import Node, S, intent


@needs_inotify
async def test_withdrawals_during_a_burst_reach_the_person_and_are_never_answered(tmp_path: Path) -> None:
    node = Node(tmp_path, ALLOW_LS)
    person = [f"p{i:03d}" for i in range(40)]
    for rid in person:
        write_request(node.root, S, rid)  # no facts: no rule decides it, the person does
    withdrawn = set(person[::2])
    requests = session_dir(node.root, S) / "requests"
    met: list[str] = []

    def meddle(point: str) -> None:
        if point == "staged" and not met:  # the burst's first batch staged: its events are streaming
            met.append(point)
            for rid in sorted(withdrawn):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(requests / f"{rid}.json")

    arbiter = ScriptedArbiter("person", lambda ask: None)
    clock = ManualClock(time.time())  # never advanced: no safety rescan
    core = ServingCore(node.root, node.state, arbiter, judge=node.authority, ledger=node.history,
                       seams=Seams(clock=clock, fault=meddle))
    core.subscribe(node.history.observe)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    key = {rid: AskKey(S, f"{rid}.json") for rid in person}
    try:
        await wait_for(lambda: set(arbiter.held) == set(key.values()), what="every ask shown to the person")
        burst = [f"b{i:04d}" for i in range(1500)]
        for rid in burst:
            write_request(node.root, S, rid, accessIntent=intent("bash", f"ls {rid}"))
        await wait_for(lambda: set(responses(node.root)) >= set(burst), within=60, what="the burst answered")
        assert met, "the withdrawals did not fall inside the burst"
        await wait_for(lambda: {key[rid] for rid in withdrawn} <= set(arbiter.withdrawn),
                       what="every withdrawal noticed from its file event")
        for rid in person:
            if key[rid] in arbiter.held:
                arbiter.release(key[rid], "allow")
        kept = set(person) - withdrawn
        await wait_for(lambda: set(responses(node.root)) >= kept, what="the person's decisions answered")
        await wait_for(lambda: all(r.written is not None or r.ended_at is not None
                                   for r in node.history.query() if r.request_id in set(person)),
                       what="every row of the person's asks closed")
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
    published = responses(node.root)
    assert not withdrawn & set(published), "a withdrawn ask was answered"
    for row in node.history.query():
        if row.request_id in withdrawn:
            assert row.written != 1 and row.outcome == "withdrawn", row
        elif row.request_id in set(person):
            assert (row.response, row.written) == (published[row.request_id], 1), row
