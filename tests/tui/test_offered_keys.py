"""The keys offered are the keys that can act: none that cannot act on the selected ask (a 20.7.3
ask's `w`, `R`, `s` without a suggestion), none of the queue's under a dialog; help wrapped once, `End`
on one press; `y` in the rule dialog without a rules file says why and how."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.widgets import Static

from tests.tui.support import (
    make_rig,
    rendered_text,
    request_body,
    settle,
    wait_for,
    wait_painted,
    wait_rows,
    write_request,
)
from tui.screens.ask_steps import ReasonScreen
from tui.screens.help import HelpScreen
from tui.screens.review_steps import ConfirmRuleScreen

pytestmark = pytest.mark.timeout(60)  # a hang guard, not a speed check


def key_bar(text: str) -> str:
    """The legend's two lines and the footer: the last three lines of the screen."""
    return "\n".join(text.splitlines()[-3:])


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_2073_ask_offers_only_the_keys_that_can_act(tmp_path: Path, size: tuple[int, int]) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("a-old", facts=False, suggestion=False, created_at=1))
    write_request(rig.root, request_body("b-new", created_at=2))
    async with rig.app.run_test(size=size) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await settle(pilot)
        bar = key_bar(rendered_text(rig.app))
        for key in (" w ", " s ", " b ", "R Rule"):
            assert key not in bar, key
        for key in (" y ", " n ", " r "):
            assert key in bar, key
        await pilot.press("R")  # not offered; a press says why
        await wait_for(pilot, lambda: "no child-fixed facts" in rig.app.queue.status_text
                       or any("no child-fixed facts" in t.message for t in rig.toasts))
        await pilot.press("j")
        await wait_painted(pilot, rig.app)
        await settle(pilot)
        bar = key_bar(rendered_text(rig.app))
        for key in (" y ", " s ", " w ", " n ", " r ", "R Rule"):
            assert key in bar, key


async def test_the_queues_keys_are_not_shown_under_a_dialog(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-1"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        assert "approve once" in rendered_text(rig.app)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, ReasonScreen))
        await settle(pilot)
        assert "approve once" not in rendered_text(rig.app)
        assert "H History" not in rendered_text(rig.app).replace("h History", "H History")
        await pilot.press("escape")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        await settle(pilot)
        assert "approve once" in rendered_text(rig.app)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_help_is_wrapped_once_and_end_goes_to_its_end_on_one_press(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    rig = make_rig(tmp_path)
    async with rig.app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: rig.app.queue.ready)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HelpScreen))
        text = rig.app.screen.query_one("#help-text", Static)
        await wait_for(pilot, lambda: "Safety" in str(text.render()))
        width = text.content_region.width
        lines = str(text.render()).splitlines()
        assert all(len(line) <= width for line in lines)  # none is wrapped again by the widget
        assert text.content_region.height == len(lines)
        body = rig.app.screen.query_one("#expand-body", VerticalScroll)
        assert body.max_scroll_y > 0
        await pilot.press("end")
        await settle(pilot)
        assert body.scroll_y == body.max_scroll_y


async def test_the_rule_dialog_end_on_one_press_and_y_without_a_rules_file_says_how(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    value = "npm test -- " + " ".join(f"--case{n}" for n in range(40))
    write_request(rig.root, request_body("req-r", value=value))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, ConfirmRuleScreen))
        await wait_painted(pilot, rig.app)
        screen = rig.app.screen
        assert isinstance(screen, ConfirmRuleScreen)
        await pilot.press("y")  # no --rules file: nowhere to write by default
        await wait_for(pilot, lambda: "--rules FILE" in rendered_text(rig.app))
        assert isinstance(rig.app.screen, ConfirmRuleScreen)
        await pilot.press("t")  # a pi config file: a diff, longer than the dialog at 80x24
        await wait_painted(pilot, rig.app)
        await settle(pilot)
        body = screen.query_one("#review-rule-body", VerticalScroll)
        assert body.max_scroll_y > 0
        await pilot.press("end")
        await settle(pilot)
        assert body.scroll_y == body.max_scroll_y
