"""The ask on screen, whatever the person did before: keys count once the ask is painted again after
a scroll, another screen or a dialog, and an ask that can no longer be answered leaves the queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from core.testing import ManualClock
from tests.tui.support import (
    FIXED_CREATED,
    FIXED_NOW,
    make_rig,
    read_response,
    rendered_text,
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
from tui.screens.run_history import HistoryScreen

pytestmark = pytest.mark.timeout(60)  # a hang guard, not a speed check


def status_text(rig: object) -> str:
    from tests.tui.support import Rig

    assert isinstance(rig, Rig)
    return str(rig.app.queue.query_one("#status", Static).render())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_keys_count_after_pgdn_another_screen_and_back(tmp_path: Path, size: tuple[int, int]) -> None:
    """The detail scrolled so its header is out of view, `h`, `esc`: the ask is on screen again and its
    keys count (they used to wait forever for a paint of the header nobody could see)."""
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-scrolled", value="npm test " + "x" * 300))
    async with rig.app.run_test(size=size) as pilot:
        await wait_rows(pilot, rig.app, 1)
        for _ in range(4):
            await pilot.press("pagedown")
        await settle(pilot)
        assert rig.app.queue.detail.scroll_y > 0
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HistoryScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)
        await wait_painted(pilot, rig.app, within=10)
        await pilot.press("y")
        await settle(pilot)
        assert "Press y again" in status_text(rig)
        await pilot.press("y")
        response = await wait_response(pilot, rig.root, "req-scrolled")
        assert response["state"] == "approved"
        assert read_response(rig.root, "req-scrolled") is not None


def _child_gives_up(root: Path, name: str) -> None:
    """What a pi child does at its deadline: delete its request, then remove the folders it emptied."""
    (requests_dir(root) / f"{name}.json").unlink()
    requests_dir(root).rmdir()
    responses_dir(root).rmdir()
    requests_dir(root).parent.rmdir()


async def test_a_child_that_gives_up_and_removes_its_last_folder_withdraws_its_ask(tmp_path: Path) -> None:
    clock = ManualClock(wall=FIXED_NOW)
    rig = make_rig(tmp_path, clock=clock.wall, core_clock=clock)
    write_request(rig.root, request_body("req-gone", created_at=FIXED_CREATED))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        clock.advance(600)  # past the child's deadline (createdAt + 10 minutes)
        _child_gives_up(rig.root, "req-gone")
        await wait_rows(pilot, rig.app, 0)
        assert "Withdrawn by the child" in status_text(rig)
        assert not rig.person.pending()


async def test_a_folder_gone_keeps_the_ask_until_the_deadline_then_y_withdraws_it(tmp_path: Path) -> None:
    """Moved away before the child's deadline says nothing of its files: the ask stays. Past the
    deadline, `y y` finds the child gone: the ask leaves as withdrawn, never "cannot be read now"."""
    clock = ManualClock(wall=FIXED_NOW)
    rig = make_rig(tmp_path, clock=clock.wall, core_clock=clock)
    write_request(rig.root, request_body("req-away", created_at=FIXED_CREATED))
    session = requests_dir(rig.root).parent
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        session.rename(tmp_path / "moved-away")
        clock.advance(2)  # a safety rescan of the missing folder
        await wait_for(pilot, lambda: clock.waiting > 0)
        await settle(pilot)
        assert len(rig.person.pending()) == 1
        clock.jump_wall(600)  # past the deadline, and no rescan since
        await pilot.press("y", "y")
        await wait_rows(pilot, rig.app, 0)
        assert "cannot be read now" not in status_text(rig)
        assert "withdrawn" in status_text(rig).lower()


async def test_a_filter_hiding_every_ask_says_so_not_no_pending_asks(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    for n in range(3):
        write_request(rig.root, request_body(f"req-{n}", value=f"git push origin b{n}"))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 3)
        await pilot.press("slash", *"zzz-nothing", "enter")
        await wait_rows(pilot, rig.app, 0)
        await settle(pilot)
        screen = rendered_text(rig.app)
        assert "No pending asks" not in screen
        assert "3 pending, none match the filter" in screen
        assert "Waiting for asks" not in screen  # the serving panel is for an empty queue
        assert rig.app.queue.sub_title == "3 pending · none match the filter"
        await pilot.press("escape")
        await wait_rows(pilot, rig.app, 3)


async def test_toasts_over_the_queue_never_cover_a_row(tmp_path: Path) -> None:
    """Arrivals and notices in a burst: over the queue, one toast of one line stands on the table's top
    edge, never over a row (the selected row's value included); what it cuts, it says (+N more)."""
    from textual.widgets._toast import Toast

    rig = make_rig(tmp_path)
    async with rig.app.run_test(size=(120, 40), notifications=True) as pilot:
        for n in range(6):  # one toast each: the gone ones must not push the next one down the rows
            write_request(rig.root, request_body(f"req-{n}", value=f"git push origin branch-{n}"))
            await wait_for(pilot, lambda n=n: len(rig.toasts) > n)  # type: ignore[misc]
        await wait_rows(pilot, rig.app, 6)
        rig.app.notify("a second notice\nwith a second line", title="Second", severity="warning")
        rig.app.notify("an error " * 20, title="Not decided", severity="error")
        await wait_for(pilot, lambda: len(rig.app.screen.query(Toast)) == 1)
        await settle(pilot)
        toasts = list(rig.app.screen.query(Toast))
        table = rig.app.queue.table.region
        for toast in toasts:
            assert toast.region.height == 1
            assert toast.region.y == table.y  # the table's top border: no row, no header
        assert "Not decided: an error" in rendered_text(rig.app)
        assert rig.toasts[-1].title == "Not decided"  # the observer hears what was said, whole


async def test_a_filter_typed_fast_never_reaches_the_decision_keys(tmp_path: Path) -> None:
    """`/` then the filter's text queued behind it at once (a fast typist, a paste): every key after
    `/` goes to the field; `n` `o` `n` in "zzz-none" used to reach the queue and deny the ask."""
    from textual import events

    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-fast"))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        for char in "/zzz-none":
            key = {"/": "slash", "-": "minus"}.get(char, char)
            rig.app.post_message(events.Key(key, char))  # all queued before the first is handled
        await wait_for(pilot, lambda: rig.app.queue.typing)
        await settle(pilot)
        await settle(pilot)
        assert not rig.decided and len(rig.person.pending()) == 1  # no deny was even started
        assert read_response(rig.root, "req-fast") is None
        assert rig.app.queue.typing
