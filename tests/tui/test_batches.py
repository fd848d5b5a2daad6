"""Batches: marked asks previewed in full and decided each on its own; what a batch may not decide
(hidden characters, values too long to list) is left to a look of its own; a denial relays its reason."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from core.person import AskDecided
from tests.tui.support import (
    Rig,
    make_rig,
    names,
    read_response,
    request_body,
    selected,
    settle,
    wait_for,
    wait_painted,
    wait_response,
    wait_rows,
    write_request,
)
from tui.screens.batch_preview import BATCH_DENY_REASON, BatchPreviewScreen
from tui.screens.queue import QueueScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(30)  # a hang guard, not a speed check


def decided(rig: Rig) -> list[tuple[str, str]]:
    return [(d.ask.request.id, d.kind) for d in rig.decided]


def three(root: Path, start: float) -> None:
    write_request(root, request_body("b-1", value="npm run build", agent="Builder", created_at=start))
    write_request(root, request_body("b-2", value="ls \u202e evil", agent="Builder", created_at=start + 1))
    write_request(root, request_body("b-3", value="cat README.md", agent="Reader", surface="read",
                                     created_at=start + 2))


# -- batches -------------------------------------------------------------------------------------------


async def test_batch_approve_previews_every_marked_ask_and_decides_each_on_its_own(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=True))
    three(rig.root, time.time() * 1000 - 5000)
    events: list[AskDecided] = []
    rig.person.subscribe(lambda e: events.append(e) if isinstance(e, AskDecided) else None)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 3)
        await pilot.press("Y")  # nothing marked yet: it says how to mark, decides nothing
        await settle(pilot)
        assert "Nothing is marked" in rig.app.queue.status_text
        await pilot.press("asterisk")  # mark all three (one has hidden characters)
        await settle(pilot)
        assert len(rig.app.queue.marked) == 3
        await pilot.press("Y")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
        screen = rig.app.screen
        assert isinstance(screen, BatchPreviewScreen)
        listed = str(screen.query_one("#batch-included", Static).render())
        assert "Builder" in listed and "npm run build" in listed and "bash" in listed
        assert "Reader" in listed and "read" in listed and "cat README.md" in listed
        left_out = str(screen.query_one("#batch-excluded", Static).render())
        assert "hidden characters" in left_out
        assert [a.request.id for a in screen.included] == ["b-1", "b-3"]
        await wait_painted(pilot, rig.app)
        await pilot.press("y")  # double press: the first y arms
        await settle(pilot)
        assert read_response(rig.root, "b-1") is None and isinstance(rig.app.screen, BatchPreviewScreen)
        await pilot.press("y")
        for rid in ("b-1", "b-3"):
            body = await wait_response(pilot, rig.root, rid)
            assert body["state"] == "approved" and body["decidedBy"] == {"kind": "user", "via": "dialog"}
        await wait_rows(pilot, rig.app, 1)
        # Each one recorded on its own, through the same path as a single decision.
        assert sorted(decided(rig)) == [("b-1", "approved"), ("b-3", "approved")]
        assert len(events) == 2
        # The ask with hidden characters was left pending and is now selected for a look of its own.
        assert read_response(rig.root, "b-2") is None
        assert selected(rig.app) == "b-2"
        assert "Decide this ask alone" in rig.app.queue.status_text
        assert not rig.app.queue.marked  # left out of the batch, it is not left marked either


async def test_batch_deny_of_what_the_filter_shows(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    start = time.time() * 1000 - 5000
    write_request(rig.root, request_body("d-1", agent="Builder", value="npm test", created_at=start))
    write_request(rig.root, request_body("d-2", agent="Reader", value="git status", created_at=start + 1))
    write_request(rig.root, request_body("d-3", agent="Builder", value="npm ci", created_at=start + 2))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 3)
        await pilot.press("slash", *"agent:build", "enter")
        await wait_rows(pilot, rig.app, 2)
        assert names(rig.app) == ["d-1", "d-3"]
        await pilot.press("asterisk", "N")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
        await wait_painted(pilot, rig.app)
        await pilot.press("y")
        for rid in ("d-1", "d-3"):  # a batch denial always carries a reason (here the default)
            assert (await wait_response(pilot, rig.root, rid))["state"] == "denied_with_reason"
        assert read_response(rig.root, "d-2") is None  # not shown, so not marked, so not decided
        await pilot.press("escape")  # clears the filter
        await wait_rows(pilot, rig.app, 1)
        assert names(rig.app) == ["d-2"]


async def test_batch_cancel_and_the_grace_window_decide_nothing(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    write_request(rig.root, request_body("c-1"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        for back in ("escape", "n"):
            await pilot.press("space", "Y") if not rig.app.queue.marked else await pilot.press("Y")
            await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
            await pilot.press(back)
            await wait_for(pilot, lambda: isinstance(rig.app.screen, QueueScreen))
            assert "Batch cancelled" in rig.app.queue.status_text
        # A grace window (the key clock stands still in it): y in the list does nothing however it is pressed.
        rig.app.safety.rules = dataclasses.replace(rig.app.safety.rules, grace_s=1.0)
        await wait_painted(pilot, rig.app)
        rig.keys.advance(2.0)  # the queue's Y counts
        await pilot.press("Y")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
        await wait_painted(pilot, rig.app)
        await pilot.press("y", "y", "y")
        await settle(pilot)
        assert isinstance(rig.app.screen, BatchPreviewScreen)
        assert read_response(rig.root, "c-1") is None and rig.decided == []


async def test_batch_keys_are_inert_in_the_grace_window_and_while_typing(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    write_request(rig.root, request_body("g-1"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("space")
        queue = rig.app.queue
        assert queue.check_action("batch", ("approve",))
        await pilot.press("slash")
        await settle(pilot)
        assert queue.typing and not queue.check_action("batch", ("approve",))
        await pilot.press("Y", "y", "n")  # typed into the filter field
        await settle(pilot)
        assert queue.filter_input.value == "Yyn"
        assert not isinstance(rig.app.screen, BatchPreviewScreen) and rig.decided == []
        await pilot.press("escape")
        await settle(pilot)
        assert not queue.typing and queue.filter_input.value == ""
        # In the grace window the safety ignores the batch key (it judges each key's read time).
        rig.app.safety.rules = dataclasses.replace(rig.app.safety.rules, grace_s=60.0)
        queue.show_selected()
        await wait_painted(pilot, rig.app)
        assert rig.app.safety.press("batch", rig.keys.monotonic()).reason == "in-grace"


async def test_marked_asks_a_batch_may_not_decide_are_unmarked_with_the_reason(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0))
    start = time.time() * 1000 - 5000
    write_request(rig.root, request_body("x-1", value="ls \u202e evil", agent="Builder", created_at=start))
    write_request(rig.root, request_body("x-2", value="make test", agent="Builder", created_at=start + 1))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        queue = rig.app.queue
        assert queue.selected is not None and queue.selected.name == "x-1.json"
        await pilot.press("space")  # mark only the ask with hidden characters
        await settle(pilot)
        assert len(queue.marked) == 1
        await pilot.press("Y")
        await settle(pilot)
        assert not isinstance(rig.app.screen, BatchPreviewScreen)  # no batch: nothing to preview
        assert not queue.marked
        status = queue.status_text
        assert "unmarked" in status and "hidden characters" in status
        assert queue.selected.name == "x-1.json"  # selected for a look of its own
        assert read_response(rig.root, "x-1") is None and read_response(rig.root, "x-2") is None


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
        assert read_response(rig.root, "bd-1") is None and len(rig.person.pending()) == 2
        assert screen.query_one("#batch-reason", Input).value == "yes, not on main"
        await pilot.press("escape")  # out of the field, the reason kept, the batch still open
        await wait_for(pilot, lambda: not screen.typing)
        assert isinstance(rig.app.screen, BatchPreviewScreen)
        assert screen.query_one("#batch-reason", Input).value == "yes, not on main"
        await pilot.press("r", "!")
        await pilot.press("backspace", "enter")  # the keys come back to the preview
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


# -- issue 20 finding 4: a batch decides the asks it showed, not their names -------------------------


async def _open_preview(pilot: object, rig: Rig, count: int) -> BatchPreviewScreen:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    await wait_rows(pilot, rig.app, count)
    await pilot.press("asterisk", "Y")
    await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
    await wait_painted(pilot, rig.app)
    screen = rig.app.screen
    assert isinstance(screen, BatchPreviewScreen)
    return screen


async def test_an_ask_rewritten_under_its_id_while_the_preview_is_open_cancels_the_batch(
        tmp_path: Path) -> None:
    """A child withdraws a previewed ask and writes `rm -rf ~` under the same id: `y` decides
    nothing (neither the new file nor the others), and the preview says why."""
    from core.vocabulary.asks import AskKey
    from tests.tui.support import SERVED

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    start = time.time() * 1000 - 5000
    path = write_request(rig.root, request_body("s-1", value="ls", created_at=start))
    write_request(rig.root, request_body("s-2", value="pwd", created_at=start + 1))
    key = AskKey(SERVED, "s-1.json")
    async with rig.app.run_test(size=(120, 40)) as pilot:
        screen = await _open_preview(pilot, rig, 2)
        shown = rig.person.get(key)
        assert shown is not None and [a.request.value for a in screen.included] == ["ls", "pwd"]
        path.unlink()
        await wait_for(pilot, lambda: rig.person.get(key) is None)
        write_request(rig.root, request_body("s-1", value="rm -rf ~", created_at=start))
        await wait_for(pilot, lambda: rig.person.get(key) is not None)
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert read_response(rig.root, "s-1") is None and read_response(rig.root, "s-2") is None
        assert rig.decided == []
        assert screen.changed is not None and "bash ls was withdrawn" in screen.changed
        keys_line = str(screen.query_one("#batch-keys", Static).render())
        assert "Nothing was decided" in keys_line
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, QueueScreen))
        assert "nothing was decided" in rig.app.queue.status_text.lower()
        assert read_response(rig.root, "s-1") is None and rig.decided == []


async def test_a_preview_whose_ask_is_withdrawn_says_so_when_y_is_pressed(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    start = time.time() * 1000 - 5000
    path = write_request(rig.root, request_body("w-1", value="ls", created_at=start))
    write_request(rig.root, request_body("w-2", value="pwd", created_at=start + 1))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        screen = await _open_preview(pilot, rig, 2)
        path.unlink()
        await wait_for(pilot, lambda: screen.changed is not None)
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(rig.app.screen, BatchPreviewScreen)  # still there, and saying why
        keys_line = str(screen.query_one("#batch-keys", Static).render())
        assert "withdrawn" in keys_line and "Nothing was decided" in keys_line
        assert read_response(rig.root, "w-2") is None and rig.decided == []


async def test_an_unrelated_change_under_the_preview_does_not_make_it_inert(tmp_path: Path) -> None:
    """An ask outside the batch withdrawn (the queue's selection moves under the preview): the
    preview's `y` still counts."""
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    start = time.time() * 1000 - 5000
    write_request(rig.root, request_body("u-1", value="ls", created_at=start))
    other = write_request(rig.root, request_body("u-2", value="pwd", created_at=start + 1))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("space")  # marks u-1, moves to u-2
        await pilot.press("Y")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
        await wait_painted(pilot, rig.app)
        assert selected(rig.app) == "u-2"
        other.unlink()  # the selected ask, not in the batch
        await wait_for(pilot, lambda: rig.app.queue.selected is not None and selected(rig.app) == "u-1")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        screen = rig.app.screen
        assert isinstance(screen, QueueScreen), (screen, getattr(screen, "_ignored", None))
        assert (await wait_response(pilot, rig.root, "u-1"))["state"] == "approved"


async def test_batch_decisions_are_told_as_batch_decisions(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    start = time.time() * 1000 - 5000
    write_request(rig.root, request_body("t-1", value="ls", created_at=start))
    write_request(rig.root, request_body("t-2", value="pwd", created_at=start + 1))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await _open_preview(pilot, rig, 2)
        await pilot.press("y")
        for rid in ("t-1", "t-2"):
            body = await wait_response(pilot, rig.root, rid)
            # The wire's `decidedBy` has no batch kind a child accepts: the person's dialog, as pi writes it.
            assert body["decidedBy"] == {"kind": "user", "via": "dialog"}
        await wait_rows(pilot, rig.app, 0)
        assert [d.batch for d in rig.decided] == [2, 2]
        assert [e.who for e in rig.app.history] == ["you (batch of 2)"] * 2


# -- issue 20 finding 8: at 80x24 the preview keeps its keys visible and its list scrollable ----------


async def test_a_batch_of_eight_at_80x24_shows_its_keys_and_says_how_to_see_every_ask(tmp_path: Path) -> None:
    from tests.tui.support import rendered_text

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    start = time.time() * 1000 - 5000
    for i in range(8):
        write_request(rig.root, request_body(f"e-{i}", value=f"echo {i}", created_at=start + i))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 8)
        await pilot.press("asterisk", "N")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
        await wait_painted(pilot, rig.app)
        await settle(pilot)
        text = rendered_text(rig.app)
        assert "cancel (nothing is decided)" in text  # the key line is on screen
        assert "Reason relayed" in text  # and the deny reason field
        await pilot.press("y")  # not every ask was on screen yet: it says how to see them
        await settle(pilot)
        assert isinstance(rig.app.screen, BatchPreviewScreen) and rig.decided == []
        assert "scroll" in rendered_text(rig.app).lower()
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("y")
        for i in range(8):
            assert (await wait_response(pilot, rig.root, f"e-{i}"))["state"] == "denied_with_reason"


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
async def test_a_batch_of_20_is_confirmed_with_the_same_keys_at_80x24_as_at_200x50(
        tmp_path: Path, size: tuple[int, int]) -> None:
    """The same key presses decide the same twenty asks at both sizes: mark all, `Y`, `end` (see the
    list to its end; nothing to scroll when it fits), `y` `y` (double press). At 80x24 a `y` before the
    end was seen says how to see it and decides nothing."""
    from tests.tui.support import rendered_text

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=True))
    start = time.time() * 1000 - 5000
    for i in range(20):
        write_request(rig.root, request_body(f"t-{i:02d}", value=f"echo {i}", created_at=start + i))
    async with rig.app.run_test(size=size) as pilot:
        await wait_rows(pilot, rig.app, 20)
        await pilot.press("asterisk", "Y")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, BatchPreviewScreen))
        await wait_painted(pilot, rig.app)
        await settle(pilot)
        assert "approve all 20 once" in rendered_text(rig.app)  # the key line is painted at both sizes
        if size == (80, 24):
            await pilot.press("y")  # the list was not seen to its end: says how, decides nothing
            await settle(pilot)
            assert "scroll" in rendered_text(rig.app).lower() and rig.decided == []
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("y", "y")
        for i in range(20):
            body = await wait_response(pilot, rig.root, f"t-{i:02d}")
            assert body["state"] == "approved"
        assert [d.batch for d in rig.decided] == [20] * 20
