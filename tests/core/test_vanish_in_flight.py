"""A request file that vanishes and comes back while its answer is being published (found by the red
campaign: a child swapping its whole session folder for a link and back mid-burst).

The record used to free the name as soon as the file vanished, so the file back under it was taken as
a new ask: judged and published a second time (two `answered`), or its first answer, placed by the
batch still in flight, met the second and this node reported its own response as FORGED. Now a record
whose answer is in flight keeps its name until the publisher reports.

A real core, the real history, real files; the publisher is held at its `arrived` fault point (the
verdict not yet recorded, the worst case: a second judgment finds no recorded verdict either).
"""

from __future__ import annotations

import os
from pathlib import Path

from core.history import HistoryStore
from core.serving.asks import DenyingArbiter
from core.testing import HeldAt
from tests.helpers import Served, read_response_when_written, session_dir, wait_for, write_request
from tests.history.support import S


async def test_a_file_moved_away_and_back_while_its_answer_is_published_is_answered_once(
    tmp_path: Path,
) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    held = HeldAt("arrived")
    async with Served(tmp_path, DenyingArbiter(), ledger=store, fault=held) as served:
        served.core.subscribe(store.observe)
        request = write_request(served.root, S, "back")
        away = session_dir(served.root, S) / "back.json.away"
        try:
            await wait_for(held.entered.is_set, what="the answer's batch held")
            os.rename(request, away)  # the child moves its folder away...
            await served.core.rescan_all()
            os.rename(away, request)  # ...and back
            await served.core.rescan_all()
        finally:
            held.release.set()
        body = await read_response_when_written(served.root, S, "back")
        assert body["decidedBy"]["kind"] == "unavailable"
        await wait_for(lambda: not request.exists(), what="the answered request removed")
        await served.core.rescan_all()
        kinds = served.kinds()
    assert kinds.count("arrived") == 1 and kinds.count("answered") == 1, kinds
    assert "forged" not in kinds and "quarantined" not in kinds
    assert [(r.outcome, r.written) for r in store.query()] == [("fail-safe", 1)]
    store.close()
