"""Deciding one ask with keys, through the real app (Pilot) against a real `ServingCore` and
`Person`: keys in, response files on disk out. The key safety's wiring (`docs/design/keys.md`): the
grace after the paint, double press, hidden characters, the steps of `w` and `r`, `b`, remapped keys,
withdrawals, quitting with asks pending."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from core.vocabulary.asks import Answered, Decision
from tests.tui.support import (
    SERVED,
    make_rig,
    read_response,
    request_body,
    requests_dir,
    responses_dir,
    settle,
    wait_for,
    wait_painted,
    wait_response,
    wait_rows,
    write_request,
)
from tui.screens.ask_steps import ReasonScreen
from tui.screens.grant_steps import GrantConfirmScreen, GrantNoFactsScreen, GrantRefusedScreen
from tui.screens.quit import QuitConfirmScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(120)  # a hang guard, not a speed check

USER = {"kind": "user", "via": "dialog"}


def status_text(app: object) -> str:
    from tui.app import AuthorizerApp

    assert isinstance(app, AuthorizerApp)
    return str(app.queue.query_one("#status", Static).render())


async def test_y_needs_a_second_press_then_approves_once(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write = request_body("req-y")
    from tests.tui.support import write_request

    write_request(rig.root, write)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y")
        await settle(pilot)
        assert "Press y again to approve." in status_text(rig.app)
        assert read_response(rig.root, "req-y") is None
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-y")
        assert response["state"] == "approved"
        assert response["approved"] is True
        assert response["decidedBy"] == USER
        assert response["responderSessionId"] == SERVED
        await wait_rows(pilot, rig.app, 0)
        assert not (requests_dir(rig.root) / "req-y.json").exists()


async def test_s_approves_for_the_requesting_subagents_session(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-s"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("s", "s")
        response = await wait_response(pilot, rig.root, "req-s")
        assert response["state"] == "approved_for_session"
        assert response["sessionGrantWidth"] == "proven"
        assert response["decidedBy"] == USER
        assert rig.authority.list_grants() == []  # the child records its own suggestion, not this node


async def test_s_without_a_suggestion_explains_and_decides_nothing(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-ns", suggestion=False))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("s", "s")
        await settle(pilot)
        assert "no session suggestion" in status_text(rig.app)
        assert read_response(rig.root, "req-ns") is None
        assert len(rig.person.pending()) == 1


async def test_w_shows_exact_pattern_confirms_and_records_the_grant(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0))
    write_request(rig.root, request_body("req-w"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        await wait_painted(pilot, rig.app)
        shown = str(rig.app.screen.query_one("#grant-list", Static).render())
        assert 'bash  "git push *"' in shown
        assert read_response(rig.root, "req-w") is None
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-w")
        assert response["state"] == "approved"  # approved_for_serving_session is never on the wire
        assert response["decidedBy"] == USER
        grants = rig.authority.list_grants()
        assert len(grants) == 1
        assert grants[0].session_id == SERVED
        assert [(g.surface, g.pattern) for g in grants] == [("bash", "git push *")]


async def test_w_cancel_and_escape_decide_nothing(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-wc"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        for back in ("escape", "n"):
            await pilot.press("w")
            await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
            await pilot.press(back)
            await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        await settle(pilot)
        assert read_response(rig.root, "req-wc") is None
        assert rig.authority.list_grants() == []


async def test_w_confirm_key_is_inert_during_the_modal_grace(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=400))
    write_request(rig.root, request_body("req-wg"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        rig.keys.advance(0.4)  # the ask's own grace is over
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        await wait_painted(pilot, rig.app)
        rig.keys.advance(0.399)
        await pilot.press("y")  # the confirmation has been on screen for less than the grace
        await settle(pilot)
        assert isinstance(rig.app.screen, GrantConfirmScreen)
        assert read_response(rig.root, "req-wg") is None and rig.authority.list_grants() == []
        rig.keys.advance(0.001)
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-wg")
        assert response["state"] == "approved"


async def test_w_y_in_one_press_on_an_unpainted_frame_decides_nothing(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=300))
    write_request(rig.root, request_body("req-wy"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        rig.keys.advance(0.3)
        await pilot.press("w", "y")  # typed fast: y lands before the confirmation could be seen
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        await settle(pilot)
        assert read_response(rig.root, "req-wy") is None and rig.authority.list_grants() == []
        assert isinstance(rig.app.screen, GrantConfirmScreen)
        await pilot.press("escape")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        assert read_response(rig.root, "req-wy") is None and rig.authority.list_grants() == []


async def test_keys_read_before_the_modal_is_painted_never_count_even_with_no_grace(tmp_path: Path) -> None:
    from textual import events

    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    write_request(rig.root, request_body("req-wk"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        for key in ("w", "y", "y"):  # all read before the app could handle (or paint) anything
            rig.app.post_message(events.Key(key, key))
        rig.keys.advance(0.001)  # whatever is painted from now on is painted after those keys were read
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        await settle(pilot)
        assert read_response(rig.root, "req-wk") is None and rig.authority.list_grants() == []
        await wait_painted(pilot, rig.app)
        await pilot.press("y")  # now it has been seen
        assert (await wait_response(pilot, rig.root, "req-wk"))["state"] == "approved"


async def test_w_refused_when_it_would_shadow_a_deny(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    # a deny the grant `git push *` would override; the ask itself matches no rule, so it is the person's
    rig = make_rig(tmp_path, permission={"bash": {"git push --force *": "deny"}})
    write_request(rig.root, request_body("req-wr"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantRefusedScreen))
        text = "\n".join(str(w.render()) for w in rig.app.screen.query(Static))
        assert "would override deny" in text
        await pilot.press("y")  # nothing to confirm here
        await pilot.press("escape")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        assert read_response(rig.root, "req-wr") is None
        assert rig.authority.list_grants() == []
        assert "refused" in status_text(rig.app)


async def test_n_denies(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-n"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("n")
        await settle(pilot)
        assert "Press n again to deny." in status_text(rig.app)
        await pilot.press("n")
        response = await wait_response(pilot, rig.root, "req-n")
        assert response["state"] == "denied"
        assert response["approved"] is False
        assert "denialReason" not in response
        assert response["decidedBy"] == USER


async def test_r_requires_a_reason_keys_are_inert_in_the_input_and_esc_goes_back(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-r"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, ReasonScreen))
        await pilot.press("enter")
        await settle(pilot)
        assert str(rig.app.screen.query_one("#reason-error", Static).render()) == "A reason is required."
        # Decision and app keys type into the field; nothing is decided, nothing quits.
        await pilot.press("y", "y", "n", "n", "s", "w", "q", "h")
        await settle(pilot)
        assert rig.app.screen.query_one(Input).value == "yynnswqh"
        assert read_response(rig.root, "req-r") is None
        await pilot.press("escape")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        assert read_response(rig.root, "req-r") is None
        assert "nothing was decided" in status_text(rig.app)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, ReasonScreen))
        await pilot.press(*"use the staging remote")
        await pilot.press("enter")
        response = await wait_response(pilot, rig.root, "req-r")
        assert response["state"] == "denied_with_reason"
        assert response["denialReason"] == "use the staging remote"
        assert response["decidedBy"] == USER


async def test_escape_never_denies(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-esc"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("escape", "escape")
        await pilot.press("n", "escape", "n")  # arm deny, esc disarms, n arms again
        await pilot.press("escape", "escape", "escape")
        await settle(pilot)
        assert read_response(rig.root, "req-esc") is None
        assert len(rig.person.pending()) == 1


async def test_moving_clears_the_armed_key(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-m1"))
    write_request(rig.root, request_body("req-m2"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("y", "j", "k", "y")
        await settle(pilot)
        assert read_response(rig.root, "req-m1") is None
        assert rig.app.queue.armed is not None
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-m1")
        assert response["state"] == "approved"
        assert read_response(rig.root, "req-m2") is None


async def test_single_press_when_double_press_is_off(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(double_press=False, input_grace_ms=0))
    write_request(rig.root, request_body("req-1p"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-1p")
        assert response["state"] == "approved"


async def test_hidden_characters_always_need_a_second_press(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(double_press=False, input_grace_ms=0))
    write_request(rig.root, request_body("req-h", value="rm -rf /\u202e/pmt"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y")
        await settle(pilot)
        assert read_response(rig.root, "req-h") is None
        assert "Press y again to approve." in status_text(rig.app)
        assert "hidden characters" in status_text(rig.app)
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-h")
        assert response["state"] == "approved"


async def test_grace_window_ignores_decision_keys_after_an_ask_appears(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(double_press=False, input_grace_ms=400))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 0)
        write_request(rig.root, request_body("req-g"))
        await wait_rows(pilot, rig.app, 1)
        rig.keys.advance(0.399)
        await pilot.press("y", "n")
        await settle(pilot)
        assert read_response(rig.root, "req-g") is None
        assert "keys wait a moment" in status_text(rig.app)
        rig.keys.advance(0.001)
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-g")
        assert response["state"] == "approved"


async def test_grace_window_after_a_decision_protects_the_next_ask(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(double_press=False, input_grace_ms=400))
    write_request(rig.root, request_body("req-a"))
    write_request(rig.root, request_body("req-b"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        rig.keys.advance(0.4)
        await pilot.press("y", "y")  # the second y lands on req-b before or within its grace
        await wait_response(pilot, rig.root, "req-a")
        await wait_rows(pilot, rig.app, 1)
        await settle(pilot)
        assert read_response(rig.root, "req-b") is None
        assert [a.key.name for a in rig.person.pending()] == ["req-b.json"]


async def test_queue_is_in_created_order_and_the_cursor_stays_during_a_decision(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    # One reading of the clock: each ask's createdAt taken at its own write moved req-0 (written later,
    # "9 s before") after req-1 whenever more than 6 s passed between them on a busy machine.
    start = time.time() * 1000
    write_request(rig.root, request_body("req-1", created_at=start - 3000))
    write_request(rig.root, request_body("req-2", created_at=start - 2000))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("j")  # the cursor on req-2
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, ReasonScreen))
        write_request(rig.root, request_body("req-0", created_at=start - 9000))
        write_request(rig.root, request_body("req-3"))
        await wait_rows(pilot, rig.app, 4)
        names = [k.name for k in rig.app.queue.table.ask_keys]
        # createdAt order: an ask created earlier (e.g. from an adopted inbox) joins in its place...
        assert names == ["req-0.json", "req-1.json", "req-2.json", "req-3.json"]
        # ...and the ask under the cursor stays the one under the cursor.
        assert rig.app.queue.selected is not None and rig.app.queue.selected.name == "req-2.json"
        await pilot.press(*"not now", "enter")
        response = await wait_response(pilot, rig.root, "req-2")
        assert response["state"] == "denied_with_reason"
        for other in ("req-0", "req-1", "req-3"):
            assert read_response(rig.root, other) is None
        await wait_rows(pilot, rig.app, 3)
        assert [k.name for k in rig.app.queue.table.ask_keys] == ["req-0.json", "req-1.json", "req-3.json"]
        # The cursor lands on the ask that took req-2's place.
        assert rig.app.queue.selected is not None and rig.app.queue.selected.name == "req-3.json"


async def test_new_ask_never_moves_the_cursor(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-1"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y")  # armed on req-1
        write_request(rig.root, request_body("req-2"))
        await wait_rows(pilot, rig.app, 2)
        assert rig.app.queue.selected is not None and rig.app.queue.selected.name == "req-1.json"
        assert rig.app.queue.armed is not None  # an arrival elsewhere changes nothing visible
        await pilot.press("y")
        assert (await wait_response(pilot, rig.root, "req-1"))["state"] == "approved"
        assert read_response(rig.root, "req-2") is None


async def test_withdrawn_ask_leaves_with_a_note_and_is_not_a_denial(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    path = write_request(rig.root, request_body("req-wd"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y")  # armed
        path.unlink()  # the child gives up
        await wait_rows(pilot, rig.app, 0)
        assert "Withdrawn by the child" in status_text(rig.app)
        assert "not a denial" in status_text(rig.app)
        assert any("withdrawn" in (n.title or "").lower() for n in rig.toasts)
        assert [e.what for e in rig.app.history] == ["withdrawn"]
        await pilot.press("y")
        await settle(pilot)
        assert read_response(rig.root, "req-wd") is None
        assert not any(responses_dir(rig.root).iterdir())


async def test_withdrawn_while_the_reason_editor_is_open(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    path = write_request(rig.root, request_body("req-wr2"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, ReasonScreen))
        await pilot.press(*"too late")
        path.unlink()
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        await wait_rows(pilot, rig.app, 0)
        await settle(pilot)
        assert read_response(rig.root, "req-wr2") is None
        assert "Withdrawn by the child" in status_text(rig.app)


async def test_decision_refused_is_shown_and_does_not_crash(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    def answered_behind_our_back(stage: str) -> None:
        """Someone else answers once the decision is on its way (written earlier, the watcher would set
        the ask aside as forged before the key: a race under load): our write must not replace theirs."""
        if stage == "arrived":
            (responses_dir(rig.root) / "req-dup.json").write_text('{"approved":false,"state":"denied",'
                                                                  '"responderSessionId":"x"}')

    rig = make_rig(tmp_path, UiSettings(double_press=False, input_grace_ms=0), fault=answered_behind_our_back)
    write_request(rig.root, request_body("req-dup"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y")
        await wait_for(pilot, lambda: "Not decided" in status_text(rig.app))
        assert read_response(rig.root, "req-dup") == {"approved": False, "state": "denied",
                                                      "responderSessionId": "x"}
        assert rig.app.is_running


async def test_quit_with_pending_asks_confirms_and_leaves_them_in_the_inbox(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path)
    path = write_request(rig.root, request_body("req-q"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        assert rig.heartbeat.exists()
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, QuitConfirmScreen))
        text = "\n".join(str(w.render()) for w in rig.app.screen.query(Static))
        assert "stay in the inbox for the next authorizer" in text
        await pilot.press("n")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        assert rig.app.is_running
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, QuitConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: not rig.app.is_running or rig.app.return_code is not None, 5)
    assert path.exists(), "the pending request stays for the next authorizer"
    assert read_response(rig.root, "req-q") is None
    assert not rig.heartbeat.exists()


async def test_remapped_dialog_keys(tmp_path: Path) -> None:
    from tests.tui.support import write_request

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, dialog_keys={"approve": "a", "deny": "j"}))
    write_request(rig.root, request_body("req-km"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        assert any("deny='j'" in r for r in rig.app.refused_keys)  # j stays navigation
        await pilot.press("y", "y")
        await settle(pilot)
        assert read_response(rig.root, "req-km") is None
        await pilot.press("a")
        await settle(pilot)
        assert "Press a again to approve." in status_text(rig.app)
        await pilot.press("a")
        assert (await wait_response(pilot, rig.root, "req-km"))["state"] == "approved"


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
        assert read_response(rig.root, "req-old") is None and rig.authority.list_grants() == []
        refusal = rig.person.serving_grant_refusal(rig.person.pending()[0].key)
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
        assert rig.person.pending()[0].key.session_id == SERVED


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
        await settle(pilot)
        assert read_response(rig.root, "req-x") is None  # a remapped key needs the double press
        await pilot.press("x")
        response = await wait_response(pilot, rig.root, "req-x")
        assert response["sessionGrantWidth"] == "family"


async def test_no_toast_covers_a_step(tmp_path: Path) -> None:
    """A toast over a step would cover its content and keys (at 120x40 too): the toasts shown go when a
    step opens, and a notice while it is open goes to the queue's status line."""
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0))
    write_request(rig.root, request_body("req-t1", value="git push origin t1"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await wait_for(pilot, lambda: any(t.title == "Permission asked" for t in rig.toasts))
        # Textual keeps the toasts it shows in `_notifications` (no public accessor).
        await wait_for(pilot, lambda: len(rig.app._notifications) > 0)  # shown over the queue
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        await wait_painted(pilot, rig.app)
        await settle(pilot)
        assert len(rig.app._notifications) == 0
        shown = len(rig.toasts)
        write_request(rig.root, request_body("req-t2", value="make t2"))
        await wait_for(pilot, lambda: len(rig.person.pending()) == 2)
        await wait_for(pilot, lambda: "asked" in rig.app.queue.status_text)
        assert len(rig.toasts) == shown and isinstance(rig.app.screen, GrantConfirmScreen)


async def test_the_ignored_project_knobs_are_told_at_80x24_too(tmp_path: Path) -> None:
    """At 80x24 notices go to the status line, where the first arrival would replace this one unread:
    the ignored knobs are told as an error toast, at every size."""
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, ignored_knobs=("project: yoloMode",)))
    write_request(rig.root, request_body("req-small"))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        # Told once the app is up, which a loaded machine may let the first row beat: waited for.
        await wait_for(pilot, lambda: any("yoloMode" in t.message and t.severity == "error"
                                          for t in rig.toasts))


async def test_a_hostile_project_config_cannot_make_n_approve(tmp_path: Path) -> None:
    """Issue 20 finding 5, end to end: the child-writable project config swaps approve and deny and
    turns the double press off; the app keeps the defaults, says so, and `n` `n` denies."""
    import argparse
    import json

    from tui.commands import app_command
    from tui.commands.node import attended_node
    from tui.screens.queue import QueueScreen

    project = tmp_path / "project"
    config = project / ".pi" / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permissionDialogKeys": {"approve": "n", "deny": "y"},
                                  "doublePressToConfirm": False}))
    parser = argparse.ArgumentParser()
    app_command.add_app_options(parser)
    args = parser.parse_args(["--agent-dir", str(tmp_path / "agent"), "--project", str(project),
                              "--forwarding-root", str(tmp_path / "r"), "--state-dir", str(tmp_path / "s"),
                              "--grace-ms", "0"])
    settings = app_command.ui_settings(args, attended_node(args).authority)
    rig = make_rig(tmp_path, settings)
    write_request(rig.root, request_body("req-hostile-keys"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await wait_for(pilot, lambda: any("permissionDialogKeys" in t.message and "Ignored" in t.message
                                          for t in rig.toasts))
        await pilot.press("n")
        await settle(pilot)
        assert read_response(rig.root, "req-hostile-keys") is None  # the double press still holds
        assert isinstance(rig.app.screen, QueueScreen)
        await pilot.press("n")
        assert (await wait_response(pilot, rig.root, "req-hostile-keys"))["state"] == "denied"


async def test_the_whole_session_confirmation_at_80x24_shows_its_keys_and_every_ask_it_decides(
        tmp_path: Path) -> None:
    """Issue 20 finding 8: `w` with 12 other asks the grant would decide, at 80x24: the key line is
    painted, every one of the 12 is listed (the list scrolls), and `y` before the end was on screen
    says how to see it."""
    from tests.tui.support import rendered_text

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    start = time.time() * 1000 - 5000
    for i in range(13):
        body = request_body(f"g-{i:02}", value=f"git push origin b{i}", created_at=start + i)
        write_request(rig.root, body)
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 13)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        await wait_painted(pilot, rig.app)
        await settle(pilot)
        assert "cancel (nothing is decided)" in rendered_text(rig.app)
        reach = str(rig.app.screen.query_one("#grant-reach", Static).render())
        assert all(f"git push origin b{i}" in reach for i in range(1, 13))
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(rig.app.screen, GrantConfirmScreen) and rig.decided == []
        assert "scroll" in rendered_text(rig.app)
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("y")
        for i in range(13):
            assert (await wait_response(pilot, rig.root, f"g-{i:02}"))["state"] == "approved"


async def test_a_grant_is_shown_as_written_and_as_it_acts(tmp_path: Path) -> None:
    """Issue 20 finding 6: a child's suggestion `~/projects/app/../../../../*` acts as `/*`; the
    detail and the whole-session confirmation say so."""
    import posixpath
    from pathlib import Path as _Path

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    body = request_body("g-acts", value="/home/x/projects/app/src/a.ts", surface="read")
    body["sessionApproval"] = {"grants": [{"surface": "read", "pattern": "~/projects/app/../../../../*"}]}
    write_request(rig.root, body)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantConfirmScreen))
        listed = str(rig.app.screen.query_one("#grant-list", Static).render())
        acting = posixpath.normpath(f"{_Path.home()}/projects/app/../../../..").rstrip("/") + "/*"
        assert "~/projects/app/../../../../*" in listed and f'acts as "{acting}"' in listed


async def test_an_ask_decided_elsewhere_says_so_and_a_key_meant_for_it_does_nothing(tmp_path: Path) -> None:
    """Issue 25: a broker ask the person is looking at is decided by another approver (the arbiter's
    `withdraw(key, "decided elsewhere by N")`): the app says so, and the key pressed for it lands on
    the next ask inside its grace, so it decides nothing and says why."""
    from tests.tui.support import broker_ask

    rig = make_rig(tmp_path, UiSettings(double_press=False, input_grace_ms=400))
    now = time.time()
    first = broker_ask("host-a", "demo-host-a", request_body("r-a", created_at=now * 1000 - 2000),
                       arrived_at=now)
    second = broker_ask("host-b", "demo-host-b", request_body("r-b", value="npm test", created_at=now * 1000),
                        arrived_at=now)
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 0)
        decisions = [rig.person.decide(first), rig.person.decide(second)]
        await wait_rows(pilot, rig.app, 2)
        rig.keys.advance(0.4)
        assert rig.app.queue.selected == first.key
        rig.person.withdraw(first.key, "decided elsewhere by approver-2")
        await pilot.press("y")  # meant for host-a's ask
        await wait_rows(pilot, rig.app, 1)
        await settle(pilot)
        assert decisions[0].cancelled() and not decisions[1].done()
        assert rig.app.queue.selected == second.key
        status = status_text(rig.app)
        assert "Nothing decided" in status and "decided elsewhere by approver-2" in status
        assert "(from host-a)" in status
        assert [(e.what, e.detail) for e in rig.app.history] == [
            ("withdrawn", "decided elsewhere by approver-2")]
        rig.keys.advance(0.4)
        press = asyncio.create_task(pilot.press("y"))  # its call waits until the verdict is written
        await wait_for(pilot, lambda: decisions[1].done())
        decision = decisions[1].result()
        assert isinstance(decision, Decision) and decision.response.approved is True
        assert decision.reply is not None
        decision.reply.set_result(Answered(written=True))  # as the broker inbox does once it is written
        await press
        await wait_rows(pilot, rig.app, 0)


async def test_the_toast_names_the_approver_that_decided_elsewhere(tmp_path: Path) -> None:
    from tests.tui.support import broker_ask

    rig = make_rig(tmp_path)
    now = time.time()
    ask = broker_ask("host-a", "demo-host-a", request_body("r-t", created_at=now * 1000), arrived_at=now)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 0)
        rig.person.decide(ask)
        await wait_rows(pilot, rig.app, 1)
        rig.person.withdraw(ask.key, "decided elsewhere by approver-2")
        await wait_rows(pilot, rig.app, 0)
        toast = next(n for n in rig.toasts if n.title == "Ask answered elsewhere")
        assert "decided elsewhere by approver-2" in toast.message and "(from host-a)" in toast.message
        assert "decided elsewhere by approver-2" in status_text(rig.app)


async def test_a_swapped_key_map_in_the_global_config_is_refused_and_named(tmp_path: Path) -> None:
    """Issue 34 finding 3, end to end: the global pi config (a same-user child writes it) swaps
    approve and deny and turns the double press off; the app refuses both, names the file, and
    one `n` approves nothing: `n` `n` denies."""
    import argparse
    import json

    from tui.commands import app_command
    from tui.commands.node import attended_node

    agent = tmp_path / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permissionDialogKeys": {"approve": "n", "deny": "y"},
                                  "doublePressToConfirm": False}))
    parser = argparse.ArgumentParser()
    app_command.add_app_options(parser)
    args = parser.parse_args(["--agent-dir", str(agent), "--project", str(tmp_path / "project"),
                              "--forwarding-root", str(tmp_path / "r"), "--state-dir", str(tmp_path / "s"),
                              "--grace-ms", "0"])
    settings = app_command.ui_settings(args, attended_node(args).authority)
    assert settings.double_press is True and settings.ignored_knobs == ("global: doublePressToConfirm",)
    rig = make_rig(tmp_path, settings)
    write_request(rig.root, request_body("req-swap", value="rm -rf ~/important"))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        assert sorted(rig.app.refused_keys) == ["approve='n': the default key of another decision",
                                                "deny='y': the default key of another decision"]
        named = [t for t in rig.toasts if "permissionDialogKeys" in t.message]
        assert named and str(config) in named[0].message and named[0].severity == "error"
        assert any("doublePressToConfirm" in t.message for t in rig.toasts)
        await pilot.press("n")
        await settle(pilot)
        assert read_response(rig.root, "req-swap") is None
        await pilot.press("n")
        assert (await wait_response(pilot, rig.root, "req-swap"))["state"] == "denied"


def test_no_decision_can_take_another_decisions_letter() -> None:
    from tui.actions import dialog_keymap
    keymap, refused = dialog_keymap({"approve": "r", "approveSession": "n", "deny": "s",
                                     "denyWithReason": "y", "approveSessionBoth": "w"})
    assert keymap == {} and len(refused) == 5
    keymap, refused = dialog_keymap({"approve": "a", "deny": "d"})
    assert keymap == {"ask.approve": "a", "ask.deny": "d"} and refused == []
