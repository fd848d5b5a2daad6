"""Wiring of the key-safety items of issues 10 and 12: detail scroll, `w` reach, no-facts `w`, `b`."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from tests.tui.support import (
    SERVED,
    make_rig,
    read_response,
    request_body,
    settle,
    wait_for,
    wait_painted,
    wait_response,
    wait_rows,
    write_request,
)
from tui.screens.grant_steps import GrantConfirmScreen, GrantNoFactsScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(120)  # a hang guard, not a speed check


async def test_detail_opens_at_the_top_when_the_selected_ask_changes(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    long = "\n".join(f"line {n} of a very long script" for n in range(120))
    write_request(rig.root, request_body("req-long", value=long))
    write_request(rig.root, request_body("req-next", value="git status"))
    async with rig.app.run_test(size=(100, 30)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        detail = rig.app.queue.detail
        await pilot.press("pagedown", "pagedown", "pagedown")
        await wait_for(pilot, lambda: detail.scroll_y > 0)
        await pilot.press("y")  # decides req-long; req-next takes its place
        await wait_response(pilot, rig.root, "req-long")
        await wait_rows(pilot, rig.app, 1)
        assert rig.app.queue.selected is not None and rig.app.queue.selected.name == "req-next.json"
        assert detail.scroll_y == 0
        write_request(rig.root, request_body("req-third", value=long))
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("j", "pagedown", "pagedown")
        await wait_for(pilot, lambda: detail.scroll_y > 0)
        await pilot.press("k")  # moving back also opens the other ask at its top
        await wait_for(pilot, lambda: rig.app.queue.selected is not None
                       and rig.app.queue.selected.name == "req-next.json")
        assert detail.scroll_y == 0


async def test_w_without_facts_explains_and_offers_the_alternatives(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-old", facts=False))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantNoFactsScreen))
        text = str(rig.app.screen.query_one("#nofacts-text", Static).render())
        assert "could therefore never match anything" in text
        assert " y " in text and "approve this call once" in text
        assert " s " in text and "subagent's session" in text
        await pilot.press("y")  # nothing to confirm here
        await pilot.press("escape")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        await settle(pilot)
        assert read_response(rig.root, "req-old") is None and rig.book.recorded == []
        refusal = rig.human.serving_grant_refusal(rig.human.pending()[0].key)
        assert refusal is not None and "cannot apply to asks without facts" in refusal


async def test_w_without_facts_or_suggestion_offers_only_once(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-bare", facts=False, suggestion=False))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantNoFactsScreen))
        text = str(rig.app.screen.query_one("#nofacts-text", Static).render())
        assert "approve this call once" in text and "subagent's session" not in text


async def test_w_shows_how_many_other_asks_it_decides_and_decides_them(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-g1", created_at=1000, value="git push origin main"))
    write_request(rig.root, request_body("req-g2", created_at=1001, value="git push origin dev",
                                         agent="Builder"))
    write_request(rig.root, request_body("req-g3", created_at=1002, value="git push --tags"))
    write_request(rig.root, request_body("req-other", created_at=1003, value="rm -rf build"))
    write_request(rig.root, request_body("req-nofacts", created_at=1004, value="git push x", facts=False))
    async with rig.app.run_test(size=(120, 50)) as pilot:
        await wait_rows(pilot, rig.app, 5)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        await wait_painted(pilot, rig.app)
        reach = str(rig.app.screen.query_one("#grant-reach", Static).render())
        assert "2 other pending asks" in reach
        assert "git push origin dev" in reach and "git push --tags" in reach and "rm -rf" not in reach
        await pilot.press("y")
        first = await wait_response(pilot, rig.root, "req-g1")
        second = await wait_response(pilot, rig.root, "req-g2")
        third = await wait_response(pilot, rig.root, "req-g3")
        assert first["decidedBy"] == {"kind": "user", "via": "dialog"}
        for granted in (second, third):
            assert granted["state"] == "approved"
            assert granted["decidedBy"] == {"kind": "session_approval", "surface": "bash",
                                            "pattern": "git push *"}
        await wait_rows(pilot, rig.app, 2)
        assert read_response(rig.root, "req-other") is None and read_response(rig.root, "req-nofacts") is None
        status = str(rig.app.queue.query_one("#status", Static).render())
        assert "decided 2 other pending asks" in status
        kinds = [(e.what, e.who) for e in rig.app.history]
        assert kinds == [("approved_for_serving_session", "you"), ("approved_by_serving_grant", "grant"),
                         ("approved_by_serving_grant", "grant")]


async def test_history_tells_once_session_grant_and_rule_apart(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    for n, name in enumerate(("req-1-once", "req-2-sess", "req-3-grant")):
        write_request(rig.root, request_body(name, value=f"git push {n}", created_at=1_000 + n))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 3)
        await pilot.press("y")
        await wait_response(pilot, rig.root, "req-1-once")
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("s")
        assert (await wait_response(pilot, rig.root, "req-2-sess"))["state"] == "approved_for_session"
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        await wait_painted(pilot, rig.app)
        await pilot.press("y")
        await wait_response(pilot, rig.root, "req-3-grant")
        await wait_rows(pilot, rig.app, 0)
        whats = [e.what for e in rig.app.history]
        assert whats == ["approved", "approved_for_session", "approved_for_serving_session"]
        await pilot.press("h")
        await settle(pilot)
        shown = str(rig.app.screen.query_one("#history-list", Static).render())
        assert "approved_for_session" in shown and "approved_for_serving_session" in shown


async def test_b_approves_both_directions_only_for_one_direction_grants(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=True))
    read = request_body("req-a-read", surface="path_read", value="/repo/src/a.ts", created_at=1_000)
    read["sessionApproval"] = {"grants": [{"surface": "path_read", "pattern": "/repo/src/*"}]}
    write_request(rig.root, read)
    write_request(rig.root, request_body("req-b-bash", created_at=2_000))
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        legend = str(rig.app.queue.query_one("#legend", Static).render())
        assert "both directions" in legend
        await pilot.press("b")
        await settle(pilot)
        assert "Press b again" in str(rig.app.queue.query_one("#status", Static).render())
        await pilot.press("b")
        response = await wait_response(pilot, rig.root, "req-a-read")
        assert response["state"] == "approved_for_session" and response["sessionGrantWidth"] == "family"
        await wait_rows(pilot, rig.app, 1)
        legend = str(rig.app.queue.query_one("#legend", Static).render())
        assert "both directions" not in legend  # bash proves no direction: not offered, as in pi
        await pilot.press("b", "b")
        await settle(pilot)
        assert read_response(rig.root, "req-b-bash") is None
        assert rig.human.pending()[0].key.session_id == SERVED


async def test_remapped_both_directions_key(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False,
                                        dialog_keys={"approveSessionBoth": "x"}))
    read = request_body("req-x", surface="external_directory_write", value="/other/a")
    read["sessionApproval"] = {"grants": [{"surface": "external_directory_write", "pattern": "/other/*"}]}
    write_request(rig.root, read)
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        assert rig.app.refused_keys == []
        await pilot.press("x")
        response = await wait_response(pilot, rig.root, "req-x")
        assert response["sessionGrantWidth"] == "family"
