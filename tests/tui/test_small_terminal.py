"""The layout at 80×24 (first class): the env line never breaks inside the session id, the history
keeps its value column and cuts what gives way with an ellipsis, every column has a header."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from core.history import HistoryStore
from tests.tui.support import (
    SERVED,
    attended_node,
    make_rig,
    rendered_text,
    request_body,
    wait_for,
    wait_painted,
    wait_response,
    write_request,
)
from tui.app import AuthorizerApp
from tui.screens.review import ReviewScreen
from tui.screens.sessions import SessionsScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(60)  # a hang guard, not a speed check
SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("size", SIZES)
async def test_the_env_line_never_breaks_inside_the_session_id(tmp_path: Path, size: tuple[int, int]) -> None:
    rig = make_rig(tmp_path)
    async with rig.app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: rig.app.queue.ready)
        await pilot.pause()
        assert f"PI_SUBAGENT_PARENT_SESSION={SERVED}" in rendered_text(rig.app)  # on the empty queue
        await pilot.press("S")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, SessionsScreen))
        await pilot.pause()
        screen = rendered_text(rig.app)
        assert f"PI_SUBAGENT_PARENT_SESSION={SERVED}" in screen
        table = rig.app.screen.query_one(DataTable)
        assert all(str(column.label).strip() for column in table.columns.values())  # every column named
        await pilot.press("c")
        await pilot.pause()
        assert rig.app.clipboard == f"PI_SUBAGENT_PARENT_SESSION={SERVED} PI_IS_SUBAGENT=1"


async def test_the_history_at_80x24_keeps_the_value_and_cuts_decided_by_with_an_ellipsis(
    tmp_path: Path,
) -> None:
    root, state = tmp_path / "forwarding", tmp_path / "state"
    store = HistoryStore.in_state_dir(state)
    node = attended_node(tmp_path, store)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(80, 24)) as pilot:
        write_request(root, request_body("seen-1", value="git push origin v2"))
        await wait_for(pilot, lambda: len(node.person.pending()) == 1)
        await wait_painted(pilot, app)
        await pilot.press("y")
        await wait_response(pilot, root, "seen-1")
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await wait_for(pilot, lambda: "origin v2" in rendered_text(app))
        lines = rendered_text(app).splitlines()
        header = next(line for line in lines if line.lstrip().startswith("Time"))
        assert "Decided by" in header and "Value" in header
        row = next(line for line in lines if "git push origin v2" in line)
        assert "person…" in row  # "person (dialog)" is cut, and says so
