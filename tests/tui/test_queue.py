"""The queue with many asks: the filter, jumps and order, the session column, small terminals, cut
values that say so, notes about one ask, whole column headers at every size, a detail laid out again
only when its shape changes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual.widgets import Footer, Static

from tests.tui.support import (
    OTHER,
    SERVED,
    make_rig,
    names,
    rendered_text,
    request_body,
    selected,
    settle,
    wait_for,
    wait_rows,
    write_request,
)
from tui.sanitize import elide, fit, safe_plain, sanitize
from tui.screens.ask_steps import ReasonScreen
from tui.screens.queue import QueueScreen
from tui.widgets.ask_columns import COLUMNS
from tui.widgets.ask_filter import AskFilter

pytestmark = pytest.mark.timeout(30)  # a hang guard, not a speed check

LONG = "cd /repo && npm install left-pad && git push origin main --force-with-lease && echo all-done"


# -- find, jump, order, sessions -------------------------------------------------------------------------


async def test_filter_home_end_and_the_session_column(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, sessions=(SERVED, OTHER))
    start = time.time() * 1000 - 9000
    write_request(rig.root, request_body("s-1", agent="Alpha", created_at=start))
    write_request(rig.root, request_body("s-2", agent="Beta", created_at=start + 1, target=OTHER), OTHER)
    write_request(rig.root, request_body("s-3", agent="Gamma", created_at=start + 2, value="make deploy"))
    async with rig.app.run_test(size=(160, 40)) as pilot:
        await wait_rows(pilot, rig.app, 3)
        assert "session" in rig.app.queue.table.column_keys  # two sessions served
        assert names(rig.app) == ["s-1", "s-2", "s-3"]
        await pilot.press("end")
        assert selected(rig.app) == "s-3"
        await pilot.press("home")
        assert selected(rig.app) == "s-1"
        await pilot.press("slash", *f"session:{OTHER[:13]}")
        await wait_rows(pilot, rig.app, 1)
        assert names(rig.app) == ["s-2"]
        await pilot.press("ctrl+a", "ctrl+k", *"deploy", "enter")
        await wait_rows(pilot, rig.app, 1)
        assert names(rig.app) == ["s-3"] and selected(rig.app) == "s-3"
        assert "1 shown" in str(rig.app.queue.sub_title)
        await pilot.press("escape")
        await wait_rows(pilot, rig.app, 3)
        assert selected(rig.app) == "s-3"


async def test_one_session_has_no_session_column(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("one"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        assert "session" not in rig.app.queue.table.column_keys


async def test_asks_of_an_adopted_inbox_join_in_created_order(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    now = time.time() * 1000
    write_request(rig.root, request_body("mine-1", created_at=now - 4000))
    write_request(rig.root, request_body("mine-2", created_at=now - 1000))
    write_request(rig.root, request_body("theirs", created_at=now - 2000, target=OTHER), OTHER)
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("j")
        assert selected(rig.app) == "mine-2"
        rig.core.add_session(OTHER)  # what `a` on the sessions screen does
        await wait_rows(pilot, rig.app, 3)
        assert names(rig.app) == ["mine-1", "theirs", "mine-2"]
        assert selected(rig.app) == "mine-2"  # the ask under the cursor did not change
        assert "session" in rig.app.queue.table.column_keys
        assert [a.request.id for a in rig.person.pending()] == ["mine-1", "theirs", "mine-2"]


# -- small terminals, cuts, status, screens ----------------------------------------------------------------


async def test_80x24_shows_every_decision_key_and_no_toast_covers_the_ask(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("small", value=LONG))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        # The arrival notice is coalesced on a short timer: wait for it, not for a fixed time.
        await wait_for(pilot, lambda: "Permission asked" in rig.app.queue.status_text)
        await settle(pilot)
        assert rig.app.queue.compact
        text = rendered_text(rig.app)
        lines = text.splitlines()
        legend = "\n".join(lines[-3:-1])
        for key in (" y ", " s ", " w ", " n ", " r ", " space ", " * ", " Y ", " N ", " / "):
            assert key in legend, key
        assert not rig.toasts  # the arrival went to the status line, not a toast
        assert "Permission asked" in rig.app.queue.status_text
        assert "…+" in text  # the long command says it goes on


async def test_a_cut_value_says_how_much_is_hidden(tmp_path: Path) -> None:
    assert elide("abcdefghij", 10) == "abcdefghij"
    assert elide("abcdefghijk", 8) == "abcd…+7" and len(elide("x" * 500, 60)) <= 60
    assert safe_plain(LONG, 30) == LONG[:26] + f"…+{len(LONG) - 26}"
    cell = fit(Text(LONG), 40)
    assert cell.cell_len <= 40 and cell.plain.endswith(f"…+{len(LONG) - len(cell.plain.split('…')[0])}")
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("cut", value=LONG))
    async with rig.app.run_test(size=(100, 30)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        row = rig.app.queue.table.get_row_at(0)
        value = row[-1]
        assert isinstance(value, Text) and "…+" in value.plain and LONG.startswith(value.plain.split("…")[0])
        await pilot.resize_terminal(200, 30)
        await wait_for(pilot, lambda: rig.app.queue.table.get_row_at(0)[-1].plain == LONG)  # room now: whole


async def test_a_note_about_one_ask_clears_when_another_is_selected(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("n-1", created_at=time.time() * 1000 - 2000))
    write_request(rig.root, request_body("n-2"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("y")
        await settle(pilot)
        assert "Press y again" in rig.app.queue.status_text
        await pilot.press("j")
        await settle(pilot)
        assert rig.app.queue.status_text.strip() == ""


async def test_deny_with_reason_keeps_the_command_in_view(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("why", value="rm -rf ./build"))
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, ReasonScreen))
        await wait_for(pilot, lambda: "rm -rf ./build" in rendered_text(rig.app))


@settings(max_examples=200, deadline=None)
@given(st.text(), st.integers(min_value=6, max_value=120))
def test_property_a_cut_is_never_silent(raw: str, width: int) -> None:
    value = sanitize(raw, single_line=True).plain  # what the app cuts: child text is sanitised first
    text = Text(value)
    cut = fit(text, width)
    assert cut.cell_len <= width
    if text.cell_len <= width:
        assert cut.plain == text.plain
    else:
        head, _, hidden = cut.plain.rpartition("…+")
        assert value.startswith(head) and int(hidden) == len(text.plain) - len(head)
    short = elide(value, width)
    kept = short.rpartition("…+")[0]
    assert len(short) <= width and (short == value or short == f"{kept}…+{len(value) - len(kept)}")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_property_any_filter_text_parses(query: str) -> None:
    parsed = AskFilter.parse(query)
    assert parsed.active == bool(query.split())


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
