"""A config change that widens is shown as a diff in the app and applied only when accepted."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from core.judging.recorded import RecordedAuthority
from core.person import HumanAuthorizer
from core.rules import IntentFacts, PolicyStore, resolve_with_policy
from core.serving import ServingCore
from core.wiring import AttendedNode
from tests.tui.support import SERVED, rendered_text, settle, wait_for
from tui.app import AuthorizerApp
from tui.screens.reload import ReloadReviewScreen
from tui.ui_settings import UiSettings


def _verdict(store: PolicyStore, command: str) -> str:
    return resolve_with_policy(store.policy("Explore"), IntentFacts("bash", (command,))).verdict


def _write(path: Path, permission: dict[str, object], stamp: int) -> None:
    path.write_text(json.dumps({"permission": permission}))
    time_ns = time.time_ns() + stamp  # a distinct signature even within one mtime tick
    os.utime(path, ns=(time_ns, time_ns))


async def test_widening_reload_is_reviewed_declined_then_accepted(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"rm *": "deny"}}}))
    store = PolicyStore(agent_dir, tmp_path / "project", None, home="/home/me")
    authority = RecordedAuthority(store)
    human = HumanAuthorizer(grants=authority)
    core = ServingCore(tmp_path / "root", tmp_path / "state", arbiter=human, judge=authority)
    core.add_background(authority.watch_config)
    core.add_session(SERVED)
    app = AuthorizerApp(AttendedNode(core, human, authority), UiSettings(input_grace_ms=0))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        _write(config, {"bash": {"*": "allow"}}, 1)
        await wait_for(pilot, lambda: isinstance(app.screen, ReloadReviewScreen))
        await wait_for(pilot, lambda: "WIDENS" in rendered_text(app))
        text = rendered_text(app)
        assert "WIDENS" in text and "+ bash '*': allow  (widens)" in text
        assert "- bash 'rm *': deny  (widens)" in text
        assert _verdict(store, "rm -rf /") == "deny"  # not applied while the person looks
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReloadReviewScreen))
        assert store.pending() == () and _verdict(store, "rm -rf /") == "deny"

        _write(config, {"bash": {"*": "allow", "rm *": "ask"}}, 2)
        await wait_for(pilot, lambda: isinstance(app.screen, ReloadReviewScreen))
        await pilot.press("a")
        await wait_for(pilot, lambda: _verdict(store, "rm -rf /") == "ask")
        assert store.pending() == ()
