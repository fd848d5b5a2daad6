"""The app with `--forward-to`: it says where asks go, and the person here gets only what the target
cannot decide, told why (real Textual via Pilot, a real core, real files)."""

from __future__ import annotations

import json
from pathlib import Path

from textual.notifications import Notification

from core.courier.targets import Target
from core.seams import Seams
from core.testing import ManualClock
from core.wiring import NodeOptions, build_attended_node
from tests.helpers import read_response_when_done, session_dir, write_request
from tests.history.support import intent
from tests.tui.support import wait_for, wait_rows
from tui.app import AppSeams, AuthorizerApp
from tui.ui_settings import UiSettings

C = "019ff96a-cccc-7000-8000-000000000041"
P = "019ff96a-pppp-7000-8000-000000000042"


async def test_the_app_says_where_asks_go_and_asks_the_person_only_what_the_target_cannot(
    tmp_path: Path,
) -> None:
    clock = ManualClock(wall=2_000_000_000.0)
    root, agent = tmp_path / "root", tmp_path / "agent"
    root.mkdir()
    (agent / "extensions" / "pi-permission-system").mkdir(parents=True)
    (agent / "extensions" / "pi-permission-system" / "config.json").write_text(json.dumps({"permission": {}}))
    options = NodeOptions(root, tmp_path / "state", agent, tmp_path / "project", seams=Seams(clock=clock),
                          forward_to=Target("session", P), node_name="node-c")
    node = build_attended_node(options, None)
    node.take_session(C)
    toasts: list[Notification] = []
    settings = UiSettings(input_grace_ms=0, double_press=False)
    app = AuthorizerApp(node, settings, AppSeams(wall=clock.wall, toasts=toasts.append))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: any(f"carried to session:{P}" in t.message for t in toasts))
        write_request(root, C, "toolu_a", accessIntent=intent("bash", "make deploy"),
                      createdAt=int(clock.wall() * 1000))
        requests_p = session_dir(root, P) / "requests"
        await wait_for(pilot, lambda: requests_p.exists() and any(requests_p.glob("*.json")))
        assert node.person.pending() == []  # carried, not shown here
        clock.advance(2.0)  # nobody serves P
        await wait_rows(pilot, app, 1)
        [ask] = node.person.pending()
        assert ask.judgment.explanation[0].startswith(f"Carried to session:{P}, which could not decide it: "
                                                      f"nobody serves session:{P}")
        await pilot.press("y")
        answer = await read_response_when_done(root, C, "toolu_a")
        assert answer["approved"] is True and answer["decidedBy"]["kind"] == "user"
