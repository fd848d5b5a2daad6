"""Many asks at once (issue 12): batches with a preview, find and jump, order, small terminals, cuts.

Pilot tests on the real core and real request files: keys in, response files on disk out.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual.command import CommandPalette
from textual.widgets import Static

from core.history import HistoryStore
from core.person import AskDecided, HumanAuthorizer
from core.serving import ServingCore
from core.wiring import AttendedNode
from tests.tui.support import (
    SERVED,
    Rig,
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
from tui.app import AuthorizerApp
from tui.sanitize import elide, fit, safe_plain, sanitize
from tui.screens.ask_steps import ReasonScreen
from tui.screens.batch_preview import BatchPreviewScreen
from tui.screens.help import HelpScreen
from tui.screens.queue import QueueScreen
from tui.screens.review import ReviewScreen
from tui.ui_settings import UiSettings
from tui.widgets.ask_filter import AskFilter

pytestmark = pytest.mark.timeout(30)
OTHER = "019ff96b-2222-7000-8000-bbbbbbbbbbbb"
LONG = "cd /repo && npm install left-pad && git push origin main --force-with-lease && echo all-done"


def names(app: AuthorizerApp) -> list[str]:
    return [k.name.removesuffix(".json") for k in app.queue.table.ask_keys]


def selected(app: AuthorizerApp) -> str:
    assert app.queue.selected is not None
    return app.queue.selected.name.removesuffix(".json")


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
    rig.human.subscribe(lambda e: events.append(e) if isinstance(e, AskDecided) else None)
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
        assert [a.request.id for a in rig.human.pending()] == ["mine-1", "theirs", "mine-2"]


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


async def test_palette_lists_every_action_and_never_decides(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    write_request(rig.root, request_body("p-1"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        commands = {c.title: c for c in rig.app.get_system_commands(rig.app.queue)}
        titles = "\n".join(commands)
        for words in ("Approve once (y)", "Deny (n)", "Filter (/)", "Mark all shown (*)", "Approve marked…",
                      "History (h)", "Sessions (S)", "Help (?)", "First ask", "Last ask"):
            assert words in titles, words
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, CommandPalette))
        await pilot.press(*"Approve once", "enter")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, QueueScreen))
        await settle(pilot)
        assert read_response(rig.root, "p-1") is None and rig.decided == []


async def test_help_on_the_history_view_lists_its_keys(tmp_path: Path) -> None:
    root, state = tmp_path / "forwarding", tmp_path / "state"
    store = HistoryStore.in_state_dir(state)
    human = HumanAuthorizer()
    core = ServingCore(root, state, arbiter=human, ledger=store)
    core.add_session(SERVED)
    app = AuthorizerApp(AttendedNode(core, human, history=store), UiSettings(input_grace_ms=0))
    async with app.run_test(size=(130, 60)) as pilot:
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await wait_for(pilot, lambda: "Decided by" in rendered_text(app))
        assert "Decided by" in rendered_text(app) and "Verdict" in rendered_text(app)  # column headers
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = "\n".join(str(w.render()) for w in app.screen.query(Static))
        for binding_id in ("review.filter", "review.suggestions", "review.details", "review.first"):
            assert f"[{binding_id}]" in text, binding_id
        assert "[history.back]" not in text  # the plain run list is not what `h` opens here
        assert "[batch.confirm]" in text and "[queue.filter]" in text


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
