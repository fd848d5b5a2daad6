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
from tests.tui.support import FakeKeyClock, settle, wait_for, wait_painted
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
    person = node.person
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
                return bool(person.pending())

            await wait_for(pilot, arrived)
            ask = person.pending()[0]
            assert ask.request.value == "git push origin main" and not ask.has_facts
            await wait_painted(pilot, app)
            keys.advance(0.5)  # past the input-grace window
            await pilot.press("y")
            assert person.pending(), "the first press only arms"
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


async def test_real_children_accept_batch_decisions(
    node_driver: NodeDriver, forwarding_root: Path, state_dir: Path, workdir: Path, tmp_path: Path
) -> None:
    """A batch approval and a batch denial, each of two real 20.7.3 children: every child reads its
    answer as it reads a single decision (the wire says `{kind: user, via: dialog}`, which the newer
    reader accepts too), and the durable history records each as part of its batch."""
    from contextlib import ExitStack

    from core.history import HistoryStore
    from tui.screens.batch_preview import BATCH_DENY_REASON, BatchPreviewScreen

    history = HistoryStore.in_state_dir(tmp_path / "history")
    node = build_attended_node(
        NodeOptions(forwarding_root, state_dir, tmp_path / "agent", tmp_path / "project"), history
    )
    person = node.person
    node.take_session(UUID_SESSION)
    keys = FakeKeyClock()
    app = AuthorizerApp(node, UiSettings(), AppSeams(keys=keys))  # double press on, 500 ms grace
    agents = ("Alpha", "Bravo", "Charlie", "Delta")
    with ExitStack() as stack:
        children = {
            agent: stack.enter_context(node_driver.start(
                "child_ask.ts",
                child_ask_args(forwarding_root, CHILD_SESSION, agent,
                               {**ASK, "value": f"make {agent.lower()}",
                                "message": f"Agent '{agent}' requested bash command 'make'. Allow?"}),
                workdir / agent, env=child_env(UUID_SESSION)))
            for agent in agents
        }
        async with app.run_test(size=(140, 45)) as pilot:
            def arrived() -> bool:
                for child in children.values():
                    assert child.proc.poll() is None, child.stderr_text()
                return len(person.pending()) == 4

            await wait_for(pilot, arrived)

            async def batch(marking: tuple[str, ...], verb: str) -> None:
                await pilot.press(*marking)  # marking moves the selection: the next ask is shown anew
                await settle(pilot)
                await wait_painted(pilot, app)
                keys.advance(0.5)  # the batch keys too wait for the paint and the grace
                for _ in range(3):  # as a person would: a key the safety ignored (a repaint meanwhile) again
                    await pilot.press(verb)
                    try:
                        await wait_for(pilot, lambda: isinstance(app.screen, BatchPreviewScreen), within=5)
                        break
                    except AssertionError:
                        await wait_painted(pilot, app)
                        keys.advance(0.5)
                assert isinstance(app.screen, BatchPreviewScreen), app.queue.status_text
                await wait_painted(pilot, app)
                keys.advance(0.5)
                await pilot.press("y", "y")  # double press

            first_two = [a.request.requester_agent_name for a in person.pending()[:2]]
            await batch(("space", "space"), "Y")
            await wait_for(pilot, lambda: len(person.pending()) == 2)
            await batch(("asterisk",), "N")
            await wait_for(pilot, lambda: not person.pending())
            results = {agent: await asyncio.to_thread(child.wait, 30) for agent, child in children.items()}
            await pilot.press("q")
    for agent, result in results.items():
        decision = result.json_line()
        if agent in first_two:
            assert decision["approved"] is True and decision["state"] == "approved", decision
        else:
            assert decision["approved"] is False and decision["state"] == "denied_with_reason", decision
            assert decision["denialReason"] == BATCH_DENY_REASON
    rows = history.query()
    assert len(rows) == 4 and all(r.decider == "person (dialog), in a batch of 2" for r in rows)
    for row in rows:
        assert row.response is not None
        assert json.loads(row.response)["decidedBy"] == {"kind": "user", "via": "dialog"}
    history.close()
