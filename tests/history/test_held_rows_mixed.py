"""A batch mixing the person's decisions (rows written at arrival, updated by their verdicts) with asks
decided the moment they arrive (their arrival claimed: new rows inserted together) marks each written
in the row its record wrote (campaign4, issue 37's fifth pass: `HistoryStore._held`, runs of row ids
marked `WHERE id BETWEEN`). Through a real serving core: every ask one row, holding the bytes its
response holds, written."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from core.seams import Seams
from core.serving import ServingCore
from core.testing import ScriptedArbiter
from core.vocabulary.asks import Ask, AskKey
from tests.core.support import responses
from tests.helpers import wait_for, write_request
from tests.history.support import Node, S


async def test_the_persons_decisions_and_asks_decided_at_arrival_in_one_batch_each_mark_their_row(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    person = [f"p{i:03d}" for i in range(30)]
    at_arrival = [f"q{i:03d}" for i in range(60)]
    arbiter: ScriptedArbiter

    def script(ask: Ask) -> str | None:
        if ask.key.name.startswith("p"):
            return None  # held: the person has not looked yet
        for i, rid in enumerate(person):  # the person decides every held ask as these arrive
            key = AskKey(S, f"{rid}.json")
            if key in arbiter.held:
                arbiter.release(key, "allow" if i % 2 else "deny")
        return "allow" if int(ask.key.name[1:4]) % 3 else "deny"

    arbiter = ScriptedArbiter("person", script)
    core = ServingCore(node.root, node.state, arbiter, ledger=node.history, seams=Seams())
    core.subscribe(node.history.observe)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        for rid in person:
            write_request(node.root, S, rid)
        await wait_for(lambda: len(arbiter.held) == len(person), what="the person's asks held")
        await wait_for(lambda: len(node.history.query()) == len(person), what="their arrival rows written")
        for rid in at_arrival:
            write_request(node.root, S, rid)
        everyone = set(person) | set(at_arrival)
        await wait_for(lambda: set(responses(node.root)) >= everyone, what="every ask answered")
        await wait_for(lambda: all(r.written is not None for r in node.history.query()), what="all noted")
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
    published = responses(node.root)
    rows = node.history.query()
    assert Counter(row.request_id for row in rows) == Counter({rid: 1 for rid in everyone})
    for row in rows:
        assert (row.response, row.written) == (published[row.request_id or ""], 1), row
        assert row.ended_at is not None
