"""The ask on screen, whatever the person did before: keys count once the ask is painted again after
a scroll, another screen or a dialog, and an ask that can no longer be answered leaves the queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from tests.tui.support import (
    make_rig,
    read_response,
    request_body,
    settle,
    wait_for,
    wait_painted,
    wait_response,
    wait_rows,
    write_request,
)
from tui.screens.run_history import HistoryScreen

pytestmark = pytest.mark.timeout(60)  # a hang guard, not a speed check


def status_text(rig: object) -> str:
    from tests.tui.support import Rig

    assert isinstance(rig, Rig)
    return str(rig.app.queue.query_one("#status", Static).render())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_keys_count_after_pgdn_another_screen_and_back(tmp_path: Path, size: tuple[int, int]) -> None:
    """The detail scrolled so its header is out of view, `h`, `esc`: the ask is on screen again and its
    keys count (they used to wait forever for a paint of the header nobody could see)."""
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-scrolled", value="npm test " + "x" * 300))
    async with rig.app.run_test(size=size) as pilot:
        await wait_rows(pilot, rig.app, 1)
        for _ in range(4):
            await pilot.press("pagedown")
        await settle(pilot)
        assert rig.app.queue.detail.scroll_y > 0
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HistoryScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        await wait_painted(pilot, rig.app, within=10)
        await pilot.press("y")
        await settle(pilot)
        assert "Press y again" in status_text(rig)
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-scrolled")
        assert response["state"] == "approved"
        assert read_response(rig.root, "req-scrolled") is not None
