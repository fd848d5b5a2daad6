"""End to end with a person: the real 20.7.3 child's ask appears in the app, `y` twice approves it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from core.wiring import NodeOptions, build_attended_node
from tests.interop.harness import NodeDriver, child_ask_args, child_env
from tests.interop.ids import CHILD_SESSION, UUID_SESSION
from tests.tui.support import FakeKeyClock, wait_for, wait_painted
from tui.app import AppSeams, AuthorizerApp
from tui.ui_settings import UiSettings

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ASK: dict[str, Any] = {
    "requestId": "ignored-by-20.7.3",
    "source": "tool_call",
    "message": "Agent 'Explore' requested bash command 'git push origin main'. Allow this command?",
    "surface": "bash",
    "value": "git push origin main",
    "toolName": "bash",
}


async def test_real_child_is_approved_with_a_double_press(
    node_driver: NodeDriver, forwarding_root: Path, state_dir: Path, workdir: Path, tmp_path: Path
) -> None:
    # as `pi-authorizer app` builds it, with no rules of its own (no agent dir config)
    node = build_attended_node(
        NodeOptions(forwarding_root, state_dir, tmp_path / "agent", tmp_path / "project"), None
    )
    human = node.person
    node.take_session(UUID_SESSION)
    keys = FakeKeyClock()
    # double press on, 500 ms grace
    app = AuthorizerApp(node, UiSettings(), AppSeams(keys=keys))
    with node_driver.start(
        "child_ask.ts",
        child_ask_args(forwarding_root, CHILD_SESSION, "Explore", ASK),
        workdir,
        env=child_env(UUID_SESSION),
    ) as child:
        async with app.run_test(size=(140, 45)) as pilot:
            def arrived() -> bool:
                assert child.proc.poll() is None, child.stderr_text()  # a child that died fails at once
                return bool(human.pending())

            await wait_for(pilot, arrived)
            ask = human.pending()[0]
            assert ask.request.value == "git push origin main" and not ask.has_facts
            await wait_painted(pilot, app)
            keys.advance(0.5)  # past the input-grace window
            await pilot.press("y")
            assert human.pending(), "the first press only arms"
            await pilot.press("y")
            result = await asyncio.to_thread(child.wait, 30)
            await pilot.press("q")
    decision = result.json_line()
    assert decision["approved"] is True and decision["state"] == "approved"
    received = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert any(
        e.get("event") == "forwarded_permission.response_received" and e.get("approved") is True
        for e in received
    )
