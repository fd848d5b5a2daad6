"""With a history store, `h` opens the durable review and shown asks are stamped in the store."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from core.history import HistoryStore
from tests.helpers import wait_for as until
from tests.tui.support import (
    OTHER,
    SERVED,
    attended_node,
    request_body,
    wait_for,
    wait_painted,
    wait_response,
    write_request,
)
from tui.app import AuthorizerApp
from tui.commands.node import take_sessions
from tui.screens.review import ReviewScreen
from tui.screens.sessions import SessionsScreen
from tui.ui_settings import UiSettings


async def test_h_opens_the_review_and_decisions_are_recorded_with_shown_time(tmp_path: Path) -> None:
    root, state = tmp_path / "forwarding", tmp_path / "state"
    store = HistoryStore.in_state_dir(state)
    node = attended_node(tmp_path, store)
    person = node.person
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(140, 45)) as pilot:
        write_request(root, request_body("seen-1"))
        await wait_for(pilot, lambda: len(person.pending()) == 1)
        await wait_painted(pilot, app)
        await pilot.press("y")
        body = await wait_response(pilot, root, "seen-1")
        assert body["state"] == "approved"
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReviewScreen))
        await pilot.press("q")
    [row] = store.reader().query()
    assert row.outcome == "user" and row.verdict == "approved"
    assert row.shown_at is not None and row.shown_at >= row.arrived_at


async def pending_row_gone(tmp: Path, store: HistoryStore) -> None:
    """An earlier run held an ask of `OTHER` whose child gave up while no one served the inbox."""
    earlier = attended_node(tmp, store, (OTHER,))
    earlier_person, root = earlier.person, earlier.core.root
    serving = asyncio.create_task(earlier.core.run())
    gone = write_request(root, request_body("gone", target=OTHER), OTHER)
    await until(lambda: len(earlier_person.pending()) == 1, what="the earlier run holds the ask")
    earlier.core.stop()
    await asyncio.wait_for(serving, 10)
    gone.unlink()
    store.write_arrivals()  # queued for a burst (`ARRIVALS_WAIT_S`): written before this run ends
    assert [row.outcome for row in store.reader().query()] == ["pending"]


#: A database message with markup, a newline and a bidi override: it must be shown literally.
HOSTILE = "[bold red]disk[/] full\n\u202efake"


def fail_updates(store: HistoryStore) -> None:
    """The real SQLite file refuses every update of a row (a trigger): the store's own calls fail."""
    conn = sqlite3.connect(store.path)
    message = HOSTILE.replace("'", "''")
    conn.execute(f"CREATE TRIGGER refuse BEFORE UPDATE ON asks BEGIN SELECT RAISE(ABORT, '{message}'); END")
    conn.commit()
    conn.close()


async def adopt_other(pilot: Pilot[int], app: AuthorizerApp) -> SessionsScreen:
    """`S`, then `a` on `OTHER` (the row below this node's own session)."""
    await pilot.press("S")
    await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
    screen = app.screen
    assert isinstance(screen, SessionsScreen)
    await wait_for(pilot, lambda: [row.session_id for row in screen.rows] == [SERVED, OTHER])
    await pilot.press("j", "a")
    return screen


async def test_adopting_an_inbox_closes_the_asks_withdrawn_while_no_one_served_it(tmp_path: Path) -> None:
    """`a` in the sessions view takes a session as the start does (`AttendedNode.take_session`)."""
    store = HistoryStore.in_state_dir(tmp_path / "state")
    await pending_row_gone(tmp_path, store)
    app = AuthorizerApp(attended_node(tmp_path, store), UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(140, 45)) as pilot:
        screen = await adopt_other(pilot, app)
        await wait_for(pilot, lambda: OTHER in screen.ours)
        await pilot.press("q")
    [row] = store.reader().query()
    assert row.outcome == "withdrawn" and row.ended_at is not None


async def test_a_failing_history_on_adopting_is_shown_literally_and_the_app_goes_on(tmp_path: Path) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    await pending_row_gone(tmp_path, store)
    fail_updates(store)
    app = AuthorizerApp(attended_node(tmp_path, store), UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(140, 45)) as pilot:
        screen = await adopt_other(pilot, app)
        note = screen.query_one("#sessions-note", Static)
        await wait_for(pilot, lambda: "History failed" in str(note.render()))
        shown = str(note.render())
        assert OTHER in screen.ours  # served all the same: the failure is the history's, not the inbox's
        assert shown.startswith(f"History failed (serving {OTHER} anyway): [bold red]disk[/] full")
        assert "\n" not in shown and "\u202e" not in shown and shown.endswith("RLO⟩fake")
        await pilot.press("j")  # still running: keys are served
        await pilot.press("q")
    [row] = store.reader().query()
    assert row.outcome == "pending"  # reconciled by a later start


async def test_the_start_says_a_failing_history_in_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    await pending_row_gone(tmp_path, store)
    fail_updates(store)
    node = attended_node(tmp_path, store)
    assert take_sessions(node, [OTHER]) == [OTHER]
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"pi-authorizer: error: serving '{OTHER}', but the history failed")
    assert line.endswith("no one served it: [bold red]disk[/] full⏎⟨U+202E RLO⟩fake")
    assert OTHER in {status.session_id for status in node.core.served.statuses()}


async def test_a_batch_decision_is_recorded_as_one(tmp_path: Path) -> None:
    """Issue 20: the history says a decision was part of a batch (the wire cannot say it)."""
    from tui.screens.batch_preview import BatchPreviewScreen

    root, state = tmp_path / "forwarding", tmp_path / "state"
    store = HistoryStore.in_state_dir(state)
    node = attended_node(tmp_path, store)
    person = node.person
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(140, 45)) as pilot:
        write_request(root, request_body("b-1", value="ls"))
        write_request(root, request_body("b-2", value="pwd"))
        await wait_for(pilot, lambda: len(person.pending()) == 2)
        await wait_painted(pilot, app)
        await pilot.press("asterisk", "Y")
        await wait_for(pilot, lambda: isinstance(app.screen, BatchPreviewScreen))
        await wait_painted(pilot, app)
        await pilot.press("y")
        await wait_response(pilot, root, "b-1")
        await wait_response(pilot, root, "b-2")
        await wait_for(pilot, lambda: all("batch of 2" in (r.decider or "") for r in store.reader().query())
                       and len(store.reader().query()) == 2)
        await pilot.press("q")
    assert sorted(r.decider or "" for r in store.reader().query()) == ["person (dialog), in a batch of 2"] * 2
