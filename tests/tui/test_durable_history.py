"""With a history store, `h` opens the durable review and shown asks are stamped in the store."""

from __future__ import annotations

from pathlib import Path

from core.history import HistoryStore
from core.human import HumanAuthorizer
from core.serving import ServingCore
from core.wiring import AttendedNode
from tests.tui.support import (
    SERVED,
    request_body,
    wait_for,
    wait_painted,
    wait_response,
    write_request,
)
from tui.app import AuthorizerApp
from tui.screens.review import ReviewScreen
from tui.settings import UiSettings


async def test_h_opens_the_review_and_decisions_are_recorded_with_shown_time(tmp_path: Path) -> None:
    root, state = tmp_path / "forwarding", tmp_path / "state"
    store = HistoryStore.in_state_dir(state)
    human = HumanAuthorizer()
    core = ServingCore(root, state, terminal=human, ledger=store)
    core.subscribe(store.observe)
    core.add_session(SERVED)
    app = AuthorizerApp(AttendedNode(core, human, history=store),
                        UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(140, 45)) as pilot:
        write_request(root, request_body("seen-1"))
        await wait_for(pilot, lambda: len(human.pending()) == 1)
        await wait_painted(pilot, app)
        await pilot.press("y")
        body = await wait_response(pilot, root, "seen-1")
        assert body["state"] == "approved"
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReviewScreen))
        await pilot.press("q")
    [row] = store.reader().query()
    assert row.outcome == "user" and row.verdict == "approved"
    assert row.shown_at is not None and row.shown_at >= row.arrived_at
