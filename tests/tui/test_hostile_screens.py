"""Hostile child text through the app's other outputs: the queue after a withdrawal and an unusable file,
the status line given raw text, the history, sessions and grants screens, on the real app serving real
files. Nothing hidden reaches a rendered segment of the screen. (Toasts are not among the strips read
here: their guard is `AuthorizerApp.notify`, which sanitises every message and title.)"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.hostile import hostile
from tests.tui.support import SERVED, make_rig, rendered_strips, request_body, settle, wait_for, wait_rows
from tui.app import AuthorizerApp

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed check
FORBIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn", "Co"})


def leaked(app: AuthorizerApp) -> list[str]:
    """Hidden code points in what the compositor would send for the current screen (toasts included)."""
    return [
        f"U+{ord(c):04X}"
        for strip in rendered_strips(app)
        for segment in strip
        for c in segment.text
        if unicodedata.category(c) in FORBIDDEN
    ]


def put(folder: Path, name: str, body: dict[str, object]) -> Path:
    """As a child writes it (temp, then rename); lone surrogates stay JSON escapes."""
    temp = folder / f".{name}.tmp"
    temp.write_text(json.dumps(body, ensure_ascii=True))
    target = folder / name
    temp.rename(target)
    return target


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile)
def test_hostile_text_reaches_no_screen_toast_or_status_raw(tmp_path_factory: pytest.TempPathFactory,
                                                            text: str) -> None:
    import asyncio

    asyncio.run(walk(tmp_path_factory.mktemp("hostile"), f"\x1b[31m\u202e{text}"))  # never harmless


async def walk(tmp: Path, text: str) -> None:
    rig = make_rig(tmp)
    requests = rig.root / "sessions" / SERVED / "requests"
    requests.mkdir(parents=True)
    (rig.root / "sessions" / SERVED / "responses").mkdir()
    body = request_body("hostile", value=f"rm {text}", agent=text, message=text)
    body["accessIntent"]["requesterCwd"] = text
    body["sessionApproval"] = {"grants": [{"surface": "bash", "pattern": text}]}
    async with rig.app.run_test(size=(140, 50)) as pilot:
        app = rig.app
        request = put(requests, "hostile.json", body)
        await wait_rows(pilot, app, 1)
        await settle(pilot)
        assert leaked(app) == [], "queue"
        put(requests, "unusable.json", {**body, "id": "unusable", "createdAt": text})  # its reason: a toast
        request.unlink()  # withdrawn: a toast and a line in this run's history
        await wait_rows(pilot, app, 0)
        await settle(pilot)
        assert leaked(app) == [], "after the withdrawal and the unusable file"
        app.queue.set_status(f"status {text}")  # the status line's guard, given raw text
        app.notify(f"raw {text}", title=text)  # the toast's guard, given raw text (not read back here)
        await settle(pilot)
        assert leaked(app) == [], "status line and raw toast"
        for action in ("history", "sessions", "grants"):  # each screen the rig's node offers
            await app.run_action(action)
            await settle(pilot)
            assert action != "history" or app.screen is not app.queue
            assert leaked(app) == [], action
            if app.screen is not app.queue:
                app.pop_screen()
                await wait_for(pilot, lambda: app.screen is app.queue)
