"""The other views, against the real core: sessions, this run's history, help, the command palette,
attention (toast, bell, OSC), and screens imported only when first opened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.command import CommandPalette
from textual.widgets import DataTable, Static

from core.forwarding.liveness import heartbeat_path
from core.history import HistoryStore
from tests.tui.support import (
    ORPHAN,
    SERVED,
    attended_node,
    make_rig,
    read_response,
    rendered_text,
    request_body,
    settle,
    wait_for,
    wait_response,
    wait_rows,
    write_request,
)
from tui.app import AuthorizerApp
from tui.attention import osc_sequence
from tui.screens.help import HelpScreen
from tui.screens.queue import QueueScreen
from tui.screens.review import ReviewScreen
from tui.screens.run_history import HistoryScreen
from tui.screens.sessions import SessionsScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(30)  # a hang guard, not a speed check

BUSY = "busy-session-2"
REPO = Path(__file__).resolve().parents[2]


def screen_text(app: object) -> str:
    from tui.app import AuthorizerApp

    assert isinstance(app, AuthorizerApp)
    return rendered_text(app)


async def test_sessions_view_lists_served_unserved_and_foreign_inboxes(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-orphan", target=ORPHAN), session_id=ORPHAN)
    write_request(rig.root, request_body("req-busy", target=BUSY), session_id=BUSY)
    beat = heartbeat_path(rig.root, BUSY)
    beat.parent.mkdir(parents=True, exist_ok=True)

    def beating() -> None:
        """Another live process of this user keeps its heartbeat fresh, as a server does (pid 1 or a
        future date would be no server); a slow machine must not let it go stale mid-test."""
        beat.write_text(json.dumps({"sessionId": BUSY, "pid": other.pid, "updatedAt": time.time() * 1e3}))

    beating()
    async with rig.app.run_test(size=(120, 40)) as pilot:
        rig.app.set_interval(1.0, beating)
        await pilot.press("S")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, SessionsScreen))
        await settle(pilot)
        text = screen_text(rig.app)
        assert SERVED in text and "serving here" in text
        assert f"PI_SUBAGENT_PARENT_SESSION={SERVED} \\" in text and "PI_IS_SUBAGENT=1" in text
        assert ORPHAN in text and "children waiting: press a to adopt" in text
        assert BUSY in text and "served elsewhere" in text and "read-only" in text
        screen = rig.app.screen
        assert isinstance(screen, SessionsScreen)
        table = screen.query_one("#sessions-table", DataTable)
        rows = [str(r.key.value) for r in table.ordered_rows]
        # The foreign inbox is read-only: adopting it is refused and nothing is served.
        table.move_cursor(row=rows.index(BUSY))
        await pilot.press("a")
        await settle(pilot)
        assert "Read-only" in str(screen.query_one("#sessions-note", Static).render())
        assert BUSY not in rig.core.served
        # The orphan is adopted with one key; its waiting child's ask reaches the queue.
        table.move_cursor(row=rows.index(ORPHAN))
        await pilot.press("a")
        await wait_for(pilot, lambda: ORPHAN in rig.core.served)
        assert heartbeat_path(rig.root, ORPHAN).exists()
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, QueueScreen))
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y", "y")
        response = await wait_response(pilot, rig.root, "req-orphan", session_id=ORPHAN)
        assert response["state"] == "approved"
        assert response["responderSessionId"] == ORPHAN
        assert read_response(rig.root, "req-busy", session_id=BUSY) is None


async def test_an_inbox_another_server_seems_to_answer_is_taken_over_with_T(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    """Issue 33 (item 6): the evidence is shown and one deliberate key takes the inbox over; the
    person's `y y` then answers the child (before, it was refused for as long as the file stayed)."""
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-busy", target=BUSY), session_id=BUSY)
    beat = heartbeat_path(rig.root, BUSY)
    beat.parent.mkdir(parents=True, exist_ok=True)
    beat.write_text(json.dumps({"sessionId": BUSY, "pid": other.pid, "updatedAt": time.time() * 1e3 + 1500}))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await pilot.press("S")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, SessionsScreen))
        await settle(pilot)
        screen = rig.app.screen
        assert isinstance(screen, SessionsScreen)
        table = screen.query_one("#sessions-table", DataTable)
        rows = [str(r.key.value) for r in table.ordered_rows]
        table.move_cursor(row=rows.index(BUSY))
        await settle(pilot)
        assert f"naming live pid {other.pid}" in screen_text(rig.app)  # the evidence
        await pilot.press("T")
        await wait_for(pilot, lambda: BUSY in rig.core.served)
        assert "Taken over" in str(screen.query_one("#sessions-note", Static).render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, QueueScreen))
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y", "y")
        response = await wait_response(pilot, rig.root, "req-busy", session_id=BUSY)
        assert response["state"] == "approved" and response["responderSessionId"] == BUSY


async def test_history_lists_this_runs_decisions(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-h1", value="ls -la"))
    write_request(rig.root, request_body("req-h2", value="rm -rf build"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 2)
        await pilot.press("y", "y")
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("r")
        await pilot.press(*"no", "enter")
        await wait_rows(pilot, rig.app, 0)
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HistoryScreen))
        await settle(pilot)
        text = screen_text(rig.app)
        assert "approved" in text and "ls -la" in text
        assert "denied_with_reason" in text and "rm -rf build" in text and "reason: no" in text
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, QueueScreen))


async def test_help_lists_every_binding_with_its_current_key(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(dialog_keys={"approve": "a"}))
    async with rig.app.run_test(size=(130, 60)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HelpScreen))
        text = "\n".join(str(w.render()) for w in rig.app.screen.query(Static))
        flat = " ".join(text.split())  # descriptions may wrap
        for binding in [*QueueScreen.BINDINGS, *rig.app.BINDINGS]:
            assert not isinstance(binding, tuple)
            assert " ".join(binding.description.split()) in flat
            assert f"[{binding.id}]" not in text  # internal ids are not the person's business
        assert "a              Approve once" in text  # the remapped key is the one shown
        assert text.index("On this screen: Deciding the selected ask") < text.index("Everywhere")
        assert "esc never denies" in flat
        # A wrapped line keeps its indent: every line of a note starts under the note's text.
        notes = text[text.index("Safety"):].splitlines()[1:]
        assert all(line.startswith(("  • ", "    ")) or not line.strip() or line.startswith("esc /")
                   for line in notes), notes
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, QueueScreen))


async def test_new_ask_rings_the_bell_and_shows_a_toast(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(prompt_notifications=("osc9", "osc777")))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert rig.signals == []
        write_request(rig.root, request_body("req-at", value="[@click=app.quit]x[/]"))
        await wait_rows(pilot, rig.app, 1)
        await wait_for(pilot, lambda: len(rig.signals) == 3)
        bell, osc9, osc777 = rig.signals
        assert bell == "\a"
        assert osc9 == "\x1b]9;pi-authorizer: 1 pending ask\x07"
        assert osc777 == "\x1b]777;notify;pi-authorizer;1 pending ask\x07"
        toasts = list(rig.toasts)
        assert toasts and toasts[-1].title == "Permission asked"
        assert "[@click=app.quit]x[/]" in toasts[-1].message and not toasts[-1].markup
        assert rig.app.is_running


async def test_signals_are_wrapped_for_tmux_passthrough(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")
    rig = make_rig(tmp_path, UiSettings(prompt_notifications=("osc9",)))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        write_request(rig.root, request_body("req-tm"))
        await wait_rows(pilot, rig.app, 1)
        await wait_for(pilot, lambda: len(rig.signals) == 2)
        assert rig.signals[1] == "\x1bPtmux;\x1b\x1b]9;pi-authorizer: 1 pending ask\x07\x1b\\"
    assert osc_sequence("bell", "t", "b", tmux=True) == "\a"
    assert os.environ["TMUX"]


async def test_a_burst_of_asks_gives_one_signal(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    for n in range(5):
        write_request(rig.root, request_body(f"req-b{n}"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 5)
        await settle(pilot)
        assert rig.signals == ["\a"]
        assert any(n.title == "5 permissions asked" for n in rig.toasts)


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
    store = HistoryStore.in_state_dir(tmp_path / "state")
    app = AuthorizerApp(attended_node(tmp_path, store), UiSettings(input_grace_ms=0))
    async with app.run_test(size=(130, 60)) as pilot:
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await wait_for(pilot, lambda: "Decided by" in rendered_text(app))
        assert "Decided by" in rendered_text(app) and "Verdict" in rendered_text(app)  # column headers
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = "\n".join(str(w.render()) for w in app.screen.query(Static))
        # `?` on the history view opens at the history view's keys, before any other screen's.
        assert text.index("On this screen: History view (h)") < text.index("Everywhere")
        assert text.index("Everywhere") < text.index("Deciding the selected ask")
        for binding in ReviewScreen.BINDINGS:
            assert isinstance(binding, Binding)
            assert binding.description in text[:text.index("Everywhere")], binding.description
        assert "Batch preview" in text and "[" not in text.replace("[y/N]", "")


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


# -- where messages appear, and what the empty queue says ---------------------------------------------


async def test_the_empty_queue_says_what_it_serves(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = rendered_text(rig.app)
        assert f"Serving session  {SERVED}" in text
        assert "Forwarding root" in text and "no pi child writes here" in text  # a test root: no layout
        assert f"PI_SUBAGENT_PARENT_SESSION={SERVED}" in text and "PI_IS_SUBAGENT=1" in text
        write_request(rig.root, request_body("req-e"))
        await wait_rows(pilot, rig.app, 1)
        assert "Serving session" not in rendered_text(rig.app)  # an ask takes its place


async def test_ctrl_c_says_which_key_quits_in_plain_text(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: bool(rig.toasts))
        toast = rig.toasts[-1]
        assert (toast.title, toast.message) == ("Ctrl+C does not quit", "Press q to quit.")
        assert not toast.markup
        assert rig.app.is_running


async def test_a_message_on_another_screen_is_a_toast_there_not_the_hidden_status_line(
    tmp_path: Path,
) -> None:
    rig = make_rig(tmp_path)
    async with rig.app.run_test(size=(80, 24)) as pilot:  # compact: on the queue, the status line
        rig.app.notify("on the queue")
        await settle(pilot)
        assert "on the queue" in rig.app.queue.query_one("#status", Static).render().plain  # type: ignore[union-attr]
        assert rig.toasts == []
        for key, screen in (("h", HistoryScreen), ("S", SessionsScreen)):
            await pilot.press(key)
            await wait_for(pilot, lambda screen=screen: isinstance(rig.app.screen, screen))  # type: ignore[misc]
            rig.app.notify(f"on {key}")
            await settle(pilot)
            assert rig.toasts and rig.toasts[-1].message == f"on {key}"
            await pilot.press("escape")
            await wait_for(pilot, lambda: rig.app.screen is rig.app.queue)


async def test_toasts_are_few_and_never_repeat(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    async with rig.app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("h")  # over the queue one stands (`tests/tui/test_visible_ask.py`)
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HistoryScreen))
        for n in (1, 2, 1, 3, 4, 5, 5):
            rig.app.notify(f"answer {n}")
        await wait_for(pilot, lambda: [n.message for n in rig.app._notifications] ==
                       ["answer 3", "answer 4", "answer 5"])


async def test_help_on_the_grants_view_opens_at_its_keys(tmp_path: Path) -> None:
    from tui.screens.grants import GrantsScreen

    rig = make_rig(tmp_path)
    async with rig.app.run_test(size=(80, 24)) as pilot:
        await pilot.press("W")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, GrantsScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HelpScreen))
        text = "\n".join(str(w.render()) for w in rig.app.screen.query(Static))
        assert text.splitlines()[2] == "On this screen: Grants view (W)"
