"""A batch press when every marked ask is one a batch may not decide: no batch runs, and the asks
are unmarked with a status that says why (they stayed marked, so the count and the next batch
carried them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.tui.support import make_rig, read_response, request_body, settle, wait_rows, write_request
from tui.screens.batch_preview import BatchPreviewScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(30)


async def test_marked_asks_a_batch_may_not_decide_are_unmarked_with_the_reason(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0))
    start = time.time() * 1000 - 5000
    write_request(rig.root, request_body("x-1", value="ls \u202e evil", agent="Builder", created_at=start))
    write_request(rig.root, request_body("x-2", value="make test", agent="Builder", created_at=start + 1))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        queue = rig.app.queue
        assert queue.selected is not None and queue.selected.name == "x-1.json"
        await pilot.press("space")  # mark only the ask with hidden characters
        await settle(pilot)
        assert len(queue.marked) == 1
        await pilot.press("Y")
        await settle(pilot)
        assert not isinstance(rig.app.screen, BatchPreviewScreen)  # no batch: nothing to preview
        assert not queue.marked
        status = queue.status_text
        assert "unmarked" in status and "hidden characters" in status
        assert queue.selected.name == "x-1.json"  # selected for a look of its own
        assert read_response(rig.root, "x-1") is None and read_response(rig.root, "x-2") is None
