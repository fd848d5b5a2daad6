"""The queue's rows as an index over every pending ask (issue 37): a filter, its clearing and a burst of
arrivals swap which rows are shown without rebuilding them; the rows, their order, the marks, the
selection and what a key decides stay exactly right. Through the real app (Pilot) and a real core."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rich.segment import Segment

from core.vocabulary.asks import AskKey
from tests.tui.support import (
    SERVED,
    Rig,
    make_rig,
    names,
    read_response,
    request_body,
    requests_dir,
    selected,
    settle,
    wait_for,
    wait_painted,
    wait_response,
    wait_rows,
    write_request,
)
from tui.app import AuthorizerApp

pytestmark = pytest.mark.timeout(120)  # a hang guard, not a speed check


def value(i: int) -> str:
    return f"make build-{i:03d}" if i % 2 else f"git push origin topic-{i:03d}"


def write_asks(root: Path, ids: range, start: float) -> None:
    for i in ids:
        write_request(root, request_body(f"r-{i:03d}", value=value(i), created_at=start + i))


def marks(app: AuthorizerApp) -> list[str]:
    """The first column of every row shown, in order: ▶ on the selected row, ● on a marked one."""
    table = app.queue.table
    return [table.get_row_at(i)[0].plain.strip() for i in range(table.row_count)]


def values(app: AuthorizerApp) -> list[str]:
    table = app.queue.table
    return [table.get_row_at(i)[-1].plain for i in range(table.row_count)]


async def test_a_filter_and_its_clearing_keep_the_rows_their_order_and_the_selection(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    start = time.time() * 1000 - 60_000
    write_asks(rig.root, range(40), start)
    everything = [f"r-{i:03d}" for i in range(40)]
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 40)
        assert names(rig.app) == everything
        await pilot.press("j", "j", "j", "j")
        assert selected(rig.app) == "r-004"  # a `git` ask, hidden by the filter below
        await pilot.press("slash", *"make")
        await wait_rows(pilot, rig.app, 20)
        odd = [f"r-{i:03d}" for i in range(1, 40, 2)]
        assert names(rig.app) == odd
        assert values(rig.app) == [value(i) for i in range(1, 40, 2)]
        assert selected(rig.app) == "r-009"  # the ask that took the hidden one's place (row 5)
        assert marks(rig.app).count("▶") == 1 and marks(rig.app)[4] == "▶"
        await pilot.press("space", *"build-01")  # narrower: `make` and `build-01`
        await wait_rows(pilot, rig.app, 5)
        assert names(rig.app) == ["r-011", "r-013", "r-015", "r-017", "r-019"]
        assert selected(rig.app) == "r-019"  # r-009 hidden by the narrower filter: its row's new ask
        await pilot.press("escape")
        await wait_rows(pilot, rig.app, 40)
        assert names(rig.app) == everything
        assert values(rig.app) == [value(i) for i in range(40)]
        assert selected(rig.app) == "r-019"  # clearing keeps the ask selected under the filter
        shown = marks(rig.app)
        assert shown.count("▶") == 1 and shown[19] == "▶"  # no stale ▶ on a row hidden meanwhile
        assert rig.app.queue.current_ask() is rig.app.queue.shown_ask()


async def test_marks_of_rows_hidden_by_the_filter_are_right_when_they_are_shown_again(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_asks(rig.root, range(6), time.time() * 1000 - 60_000)
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 6)
        await pilot.press("space", "space")  # r-000 (git) and r-001 (make) marked; the cursor moves on
        assert [k.name for k in rig.app.queue.marked] == ["r-000.json", "r-001.json"]
        await pilot.press("slash", *"make", "enter")
        await wait_rows(pilot, rig.app, 3)
        assert marks(rig.app)[0].endswith("●")  # r-001, still marked
        rig.app.queue.marked.pop(next(iter(rig.app.queue.marked)))  # r-000 unmarked while hidden
        rig.app.queue.refresh_queue()
        await pilot.press("escape")
        await wait_rows(pilot, rig.app, 6)
        shown = marks(rig.app)
        assert not shown[0].endswith("●")  # unmarked while hidden: shown unmarked
        assert shown[1].endswith("●")
        assert sum(m.endswith("●") for m in shown) == 1
        assert "1 marked" in str(rig.app.queue.table.border_subtitle)


async def test_a_burst_joins_in_created_order_and_the_cursor_stays_on_its_ask(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    start = time.time() * 1000 - 600_000
    for i in range(5):
        write_request(rig.root, request_body(f"first-{i}", created_at=start + 1000 * i))
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 5)
        await pilot.press("j", "j")
        assert selected(rig.app) == "first-2"
        for i in range(300):  # older and newer than the selected ask, interleaved
            write_request(rig.root, request_body(f"burst-{i:03d}", created_at=start + 13 * i + 1))
        await wait_rows(pilot, rig.app, 305)
        pending = [a.key.name.removesuffix(".json") for a in rig.person.pending()]
        assert names(rig.app) == pending  # every ask, in `createdAt` order, none twice
        assert selected(rig.app) == "first-2"  # the ask under the cursor did not change
        shown = marks(rig.app)
        assert shown.count("▶") == 1 and shown[names(rig.app).index("first-2")] == "▶"
        assert rig.app.queue.shown_ask() is rig.person.get(rig.app.queue.selected)  # type: ignore[arg-type]


async def test_a_decision_under_a_filter_decides_the_painted_ask_and_no_other(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_asks(rig.root, range(20), time.time() * 1000 - 60_000)
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 20)
        await pilot.press("slash", *"build-007", "enter")
        await wait_rows(pilot, rig.app, 1)
        assert selected(rig.app) == "r-007"
        await wait_painted(pilot, rig.app)
        await pilot.press("y", "y")
        response = await wait_response(pilot, rig.root, "r-007")
        assert response["state"] == "approved"
        await wait_rows(pilot, rig.app, 0)  # still filtered: nothing else matches
        assert all(read_response(rig.root, f"r-{i:03d}") is None for i in range(20) if i != 7)
        await pilot.press("escape")
        await wait_rows(pilot, rig.app, 19)
        assert "r-007" not in names(rig.app)


async def test_an_ask_replaced_under_its_name_while_hidden_is_shown_as_the_new_ask(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    start = time.time() * 1000 - 60_000
    write_asks(rig.root, range(4), start)
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 4)
        await pilot.press("slash", *"make", "enter")
        await wait_rows(pilot, rig.app, 2)
        (requests_dir(rig.root) / "r-000.json").unlink()  # its child withdrew it (hidden: a `git` ask)
        await wait_for(pilot, lambda: len(rig.person.pending()) == 3)
        write_request(rig.root, request_body("r-000", value="make replaced-000", created_at=start))
        await wait_rows(pilot, rig.app, 3)
        assert names(rig.app) == ["r-000", "r-001", "r-003"]
        assert values(rig.app)[0] == "make replaced-000"
        await pilot.press("escape")
        await wait_rows(pilot, rig.app, 4)
        assert values(rig.app) == ["make replaced-000", value(1), value(2), value(3)]
        await settle(pilot)


async def test_the_ticking_times_repaint_exactly_what_a_fresh_render_shows(tmp_path: Path) -> None:
    """Once a second only the visible ages and countdowns are rendered again; every painted line is
    still exactly what rendering the whole table afresh gives."""
    now = [time.time()]
    rig = make_rig(tmp_path, clock=lambda: now[0])
    write_asks(rig.root, range(12), now[0] * 1000 - 30_000)
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 12)
        table = rig.app.queue.table

        def painted() -> list[str]:
            return [table.render_line(y).text for y in range(1, 13)]

        before = painted()
        now[0] += 75  # every age passes a minute: each row's time cells change
        await wait_for(pilot, lambda: painted() != before)
        await settle(pilot)
        ticked = painted()
        assert all("1m" in line for line in ticked)
        table._update_count += 1  # everything rendered again from the rows
        table._clear_caches()
        assert painted() == ticked


THOUSANDS = 1500


def exact(rig: Rig) -> list[str]:
    """Every row shown is the very ask pending under its name, in the person's order under the
    filter, and every painted line is exactly what rendering the rows afresh from those asks gives
    (nothing cached from an ask that was replaced, withdrawn or hidden): the same text, styles and
    each segment's row for the mouse (renders kept across a batch of arrivals carry their row's
    index). Returns the painted lines."""
    queue = rig.app.queue
    table = queue.table
    shown = list(queue.visible_asks())
    assert list(table.ask_keys) == [ask.key for ask in shown]
    assert all(table.shown_ask(i) is ask for i, ask in enumerate(shown))  # what a decision acts on
    assert all(rig.person.get(ask.key) is ask for ask in shown)
    top = int(table.scroll_offset.y)
    lines = range(1, min(table.row_count - top, table.size.height - 1) + 1)
    segments = [list(Segment.simplify(table.render_line(y))) for y in lines]
    painted = ["".join(segment.text for segment in line) for line in segments]
    for y, line in zip(lines, painted, strict=True):
        assert (shown[top + y - 1].request.value or "?") in line
    table.refresh_rows_afresh()
    assert [list(Segment.simplify(table.render_line(y))) for y in lines] == segments
    return painted


async def test_with_thousands_pending_every_painted_row_is_its_pending_ask_exactly(tmp_path: Path) -> None:
    """A filter over thousands, arrivals, withdrawals and a replacement under it, its clearing: each
    row painted is exactly its ask's, the ask a row stands for is the one pending under its name,
    and the selection stays on its ask (or the status line says it is hidden by the filter)."""
    rig = make_rig(tmp_path)
    start = time.time() * 1000 - 600_000
    write_asks(rig.root, range(THOUSANDS), start)

    def replaced() -> str | None:
        ask = rig.person.get(AskKey(SERVED, "r-005.json"))
        return None if ask is None else ask.request.value

    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, THOUSANDS, within=90)
        exact(rig)
        await pilot.press("G")  # the last row: the rows at the bottom are painted too
        await settle(pilot)
        exact(rig)
        await pilot.press("g", *["j"] * 6)
        assert selected(rig.app) == "r-006"  # a `git` ask
        await pilot.press("slash", *"make")
        await wait_rows(pilot, rig.app, THOUSANDS // 2)
        assert selected(rig.app) == "r-013"  # the row in its place (row 7)
        assert "hidden by the filter" in rig.app.queue.status_text  # said so
        exact(rig)
        for i in (1, 3, 4, 1001):  # withdrawn by their children: shown (make) and hidden (git)
            (requests_dir(rig.root) / f"r-{i:03d}.json").unlink()
        await wait_for(pilot, lambda: len(rig.person.pending()) == THOUSANDS - 4)
        # rewritten in place by its child (a row shown): the new bytes are another ask under its name
        write_request(rig.root, request_body("r-005", value="make replaced-005", created_at=start + 5))
        await wait_for(pilot, lambda: "replaced" in (replaced() or ""))
        for i in range(THOUSANDS, THOUSANDS + 40):  # arrivals, older than most: they join in order
            write_request(rig.root, request_body(f"r-{i:03d}", value=value(i), created_at=start + i - 1400))
        expected = THOUSANDS // 2 - 3 + 20
        await wait_rows(pilot, rig.app, expected)
        assert selected(rig.app) == "r-013"  # arrivals and withdrawals around it keep it
        painted = exact(rig)
        assert "make replaced-005" in painted[0] and "make build-005" not in "".join(painted)
        await pilot.press("escape")
        await wait_rows(pilot, rig.app, THOUSANDS - 4 + 40)
        assert selected(rig.app) == "r-013"  # clearing keeps the ask selected under the filter
        exact(rig)
        assert rig.app.queue.shown_ask() is rig.person.get(rig.app.queue.selected)  # type: ignore[arg-type]
        await pilot.press("G")
        await settle(pilot)
        exact(rig)


async def test_renders_kept_across_a_burst_are_exactly_a_fresh_render(tmp_path: Path) -> None:
    """A batch of arrivals below the visible rows keeps their renders (nothing visible is painted
    again); a row replaced under its name, a withdrawal among them and arrivals above them do not:
    every painted line stays exactly what rendering afresh gives, its rows' indexes included."""
    rig = make_rig(tmp_path)
    start = time.time() * 1000 - 600_000
    write_asks(rig.root, range(300), start)
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 300)
        await pilot.press("j", "j", "j")
        await settle(pilot)
        exact(rig)
        write_asks(rig.root, range(300, 500), start)  # newer: below every visible row
        await wait_rows(pilot, rig.app, 500)
        await settle(pilot)
        exact(rig)
        write_request(rig.root, request_body("r-002", value="make replaced-002", created_at=start + 2))
        table = rig.app.queue.table

        def replaced_shown() -> bool:
            ask = rig.person.get(AskKey(SERVED, "r-002.json"))
            at = None if ask is None else table.index_of(ask.key)
            return ask is not None and at is not None and table.shown_ask(at) is ask and \
                ask.request.value == "make replaced-002" and table.row_count == 500

        await wait_for(pilot, replaced_shown)
        await settle(pilot)
        assert "replaced-002" in "".join(exact(rig))
        (requests_dir(rig.root) / "r-400.json").unlink()  # below the visible rows
        await wait_rows(pilot, rig.app, 499)
        await settle(pilot)
        exact(rig)
        (requests_dir(rig.root) / "r-001.json").unlink()  # a visible row: the rows below move up
        await wait_rows(pilot, rig.app, 498)
        await settle(pilot)
        painted = exact(rig)
        assert "build-001" not in "".join(painted)
        write_request(rig.root, request_body("r-900", value="make early-900", created_at=start - 5))
        await wait_rows(pilot, rig.app, 499)  # the oldest: first, every row moves down
        await settle(pilot)
        assert "early-900" in exact(rig)[0]
        assert selected(rig.app) == "r-003"  # the cursor stayed on its ask throughout


async def test_children_giving_up_together_leave_the_rows_and_the_selection_right(tmp_path: Path) -> None:
    """Hundreds of withdrawals reach the queue as runs of events, each run one change of the table:
    the rows left are the asks still pending, in order, painted exactly, and the selection moves to
    the ask in the place of the one the person was looking at."""
    rig = make_rig(tmp_path)
    start = time.time() * 1000 - 600_000
    write_asks(rig.root, range(300), start)
    async with rig.app.run_test(size=(140, 40)) as pilot:
        await wait_rows(pilot, rig.app, 300)
        await pilot.press(*"jjjjj")
        assert selected(rig.app) == "r-005"
        for i in range(250):
            (requests_dir(rig.root) / f"r-{i:03d}.json").unlink()
        await wait_rows(pilot, rig.app, 50)
        await settle(pilot)
        assert names(rig.app) == [f"r-{i:03d}" for i in range(250, 300)]
        assert selected(rig.app) == "r-255"  # row 6, where r-005 stood
        assert rig.app.queue.shown_ask() is rig.person.get(rig.app.queue.selected)  # type: ignore[arg-type]
        exact(rig)
