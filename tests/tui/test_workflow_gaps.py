"""Issue 12's last gaps: whole column headers at every size, a reason on every batch denial, a detail
that is laid out again only when its shape changes, and a first frame that imports only what it shows.

Pilot tests on the real core and real request files; the batch tests read the children's response files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.message import Message
from textual.widgets import Footer, Input, Static

from core.person import AskAdded
from tests.tui.support import (
    SERVED,
    make_rig,
    read_response,
    rendered_text,
    request_body,
    settle,
    wait_for,
    wait_painted,
    wait_response,
    wait_rows,
    write_request,
)
from tui.core_events import HumanChanged, ServingChanged
from tui.screens.batch_preview import BATCH_DENY_REASON, BatchPreviewScreen
from tui.screens.queue import QueueScreen
from tui.ui_settings import UiSettings
from tui.widgets.ask_columns import COLUMNS

pytestmark = pytest.mark.timeout(30)
OTHER = "019ff96b-2222-7000-8000-bbbbbbbbbbbb"
REPO = Path(__file__).resolve().parents[2]


def header_line(text: str) -> str:
    return next(line for line in text.splitlines() if " Age " in line)


@pytest.mark.parametrize("size", [(80, 24), (200, 50), (110, 30)])
async def test_every_column_header_is_whole(tmp_path: Path, size: tuple[int, int]) -> None:
    rig = make_rig(tmp_path, sessions=(SERVED, OTHER))  # two sessions: the session column too
    start = time.time() * 1000 - 5000
    write_request(rig.root, request_body("h-1", value="rm -rf build && git push --force", created_at=start))
    write_request(rig.root, request_body("h-2", target=OTHER, created_at=start + 1), OTHER)
    async with rig.app.run_test(size=size) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await settle(pilot)
        table = rig.app.queue.table
        assert "session" in table.column_keys
        header = header_line(rendered_text(rig.app))
        narrow = table.scrollable_content_region.width < 110
        for column in COLUMNS:
            assert column.label_for(narrow) in header, (column.key, header)
        assert "…" not in header
        if narrow:
            assert "Hint" in header and "Risk (hint)" not in header
        else:
            assert "Risk (hint)" in header


async def test_headers_follow_a_resize_both_ways(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("r-1", value="cat ~/.ssh/id_rsa", surface="read"))
    async with rig.app.run_test(size=(160, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        assert "Risk (hint)" in header_line(rendered_text(rig.app))
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: "Hint " in header_line(rendered_text(rig.app)))
        assert "Risk (h" not in header_line(rendered_text(rig.app))
        await pilot.resize_terminal(160, 40)
        await wait_for(pilot, lambda: "Risk (hint)" in header_line(rendered_text(rig.app)))


# -- a reason on every batch denial -------------------------------------------------------------------


def two_asks(root: Path) -> None:
    start = time.time() * 1000 - 5000
    write_request(root, request_body("bd-1", value="npm publish", agent="Builder", created_at=start))
    write_request(root, request_body("bd-2", value="git push --force", agent="Pusher", created_at=start + 1))


async def open_deny_preview(pilot: object, rig: object) -> BatchPreviewScreen:
    from textual.pilot import Pilot

    from tests.tui.support import Rig

    assert isinstance(pilot, Pilot) and isinstance(rig, Rig)
    await wait_rows(pilot, rig.app, 2)
    await pilot.press("asterisk", "N")
    await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
    await wait_painted(pilot, rig.app)
    screen = rig.app.screen
    assert isinstance(screen, BatchPreviewScreen)
    return screen


async def test_a_batch_denial_relays_the_typed_reason_to_every_child(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    two_asks(rig.root)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        screen = await open_deny_preview(pilot, rig)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.typing)
        await pilot.press(*"yes, not on main")  # y types into the field: nothing is decided
        await settle(pilot)
        assert isinstance(rig.app.screen, BatchPreviewScreen)
        assert read_response(rig.root, "bd-1") is None and len(rig.human.pending()) == 2
        assert screen.query_one("#batch-reason", Input).value == "yes, not on main"
        await pilot.press("enter")  # the keys come back to the preview
        await wait_for(pilot, lambda: not screen.typing)
        await pilot.press("y")
        for rid in ("bd-1", "bd-2"):
            body = await wait_response(pilot, rig.root, rid)
            assert body["state"] == "denied_with_reason" and body["approved"] is False
            assert body["denialReason"] == "yes, not on main"
            assert body["decidedBy"] == {"kind": "user", "via": "dialog"}
        await wait_rows(pilot, rig.app, 0)
        assert "reason: yes, not on main" in rig.app.history[-1].detail


async def test_a_batch_denial_without_a_typed_reason_carries_the_default(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    two_asks(rig.root)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        screen = await open_deny_preview(pilot, rig)
        keys = str(screen.query_one("#batch-keys", Static).render())
        assert " r " in keys and "reason" in keys
        await pilot.press("y")
        for rid in ("bd-1", "bd-2"):
            body = await wait_response(pilot, rig.root, rid)
            assert body["state"] == "denied_with_reason"
            assert body["denialReason"] == BATCH_DENY_REASON


async def test_a_batch_approval_has_no_reason_field(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    two_asks(rig.root)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("asterisk", "Y")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
        screen = rig.app.screen
        assert isinstance(screen, BatchPreviewScreen)
        assert not screen.query("#batch-reason") and screen.reason is None
        await wait_painted(pilot, rig.app)
        await pilot.press("r", "y")  # r does nothing here; y approves
        for rid in ("bd-1", "bd-2"):
            body = await wait_response(pilot, rig.root, rid)
            assert body["state"] == "approved" and "denialReason" not in body


# -- moving through the queue -----------------------------------------------------------------------


async def test_moving_between_asks_of_different_shapes_shows_each_whole(tmp_path: Path) -> None:
    """The detail is laid out again only when a panel's height changes: each ask is still shown whole."""
    rig = make_rig(tmp_path)
    start = time.time() * 1000 - 5000
    write_request(rig.root, request_body("m-1", value="ls", created_at=start))
    write_request(rig.root, request_body("m-2", value="ls", created_at=start + 1))
    tall = request_body("m-3", value="one", created_at=start + 2)
    tall["accessIntent"]["matchValues"] = [f"value-{i}" for i in range(6)]
    write_request(rig.root, tall)
    async with rig.app.run_test(size=(120, 60)) as pilot:
        await wait_rows(pilot, rig.app, 3)
        facts = rig.app.queue.detail.query_one("#facts", Static)
        footer = rig.app.queue.query_one(Footer)
        await wait_for(pilot, lambda: bool(footer.children))
        keys_before = list(footer.children)
        short = facts.outer_size.height
        await pilot.press("j")  # same shape: same height
        await settle(pilot)
        assert rig.app.queue.selected is not None and rig.app.queue.selected.name == "m-2.json"
        assert facts.outer_size.height == short
        assert list(footer.children) == keys_before  # the footer was not rebuilt for a move
        await pilot.press("j")  # six values: taller, laid out again, every value on screen
        await wait_for(pilot, lambda: facts.outer_size.height >= short + 5)
        text = rendered_text(rig.app)
        for i in range(6):
            assert f"value-{i}" in text
        await pilot.press("k")
        await wait_for(pilot, lambda: facts.outer_size.height == short)
        assert "value-5" not in rendered_text(rig.app)
        assert isinstance(rig.app.screen, QueueScreen)


# -- the first frame --------------------------------------------------------------------------------


def test_the_app_imports_no_screen_it_does_not_show_at_start() -> None:
    """Screens opened later (grants, help, review, sessions, config review) and the rule suggester load
    when first opened, not before the first frame."""
    later = ["tui.screens.grants", "tui.screens.help", "tui.screens.review", "tui.screens.sessions",
             "tui.screens.reload", "tui.screens.review_steps", "core.history.suggest",
             "tui.widgets.history_list"]
    code = f"import sys, json, tui.app; print(json.dumps([m for m in {later!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         timeout=60)
    assert json.loads(out.stdout) == []


# -- the core's events reach the app as Messages ----------------------------------------------------


async def test_asks_and_serving_events_reach_the_app_as_messages(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    seen: list[Message] = []
    write_request(rig.root, request_body("msg-1"))
    async with rig.app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_rows(pilot, rig.app, 1)
        added = [m.event for m in seen if isinstance(m, HumanChanged)]
        assert [type(e) for e in added] == [AskAdded] and added[0].ask.request.id == "msg-1"
        await pilot.press("y")
        await wait_response(pilot, rig.root, "msg-1")
        await wait_for(pilot, lambda: any(isinstance(m, ServingChanged) and m.event.kind == "answered"
                                          for m in seen))
