"""What the history holds queued as the app's process ends is kept: written, or spooled beside it
for the next start, on every exit (review9). A hangup ends the process from inside the app
(`Quitting._force_exit`): the command's own close never ran there, and the queue was dropped. An app
that ends while serving still runs (a crash) keeps the history's connection open: a batch still
committing on the disk thread is recorded, not denied for safety against a closed database."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.history.spool import spool_name
from core.seams import Seams
from core.testing import HeldAt, ManualClock
from tests.helpers import needs_inotify
from tests.helpers import wait_for as until
from tests.tui.support import attended_node, request_body, wait_for, write_request
from tui.app import AuthorizerApp
from tui.ui_settings import UiSettings


class Exited(BaseException):
    """What `os._exit` would do: nothing after it runs."""


@needs_inotify  # the second ask comes after the start: seen by its event (the portable watcher polls)
async def test_a_hangup_keeps_what_the_history_holds_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, state = tmp_path / "forwarding", tmp_path / "state"
    clock = ManualClock()  # the queued arrival never becomes due for the delayed worker
    store = HistoryStore.in_state_dir(state, seams=Seams(clock=clock))
    node = attended_node(tmp_path, store, clock=clock)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    at_exit: dict[str, object] = {}

    def exit_now(code: int) -> None:  # what the process holds as it ends
        with sqlite3.connect(store.path) as conn:
            rows = conn.execute("SELECT request_id, outcome FROM asks").fetchall()
        at_exit.update(code=code, rows=rows, spooled=(state / spool_name(store.path)).exists())
        raise Exited

    monkeypatch.setattr("tui.quitting.os._exit", exit_now)
    async with app.run_test(size=(140, 45)) as pilot:
        write_request(root, request_body("shown-1"))
        await wait_for(pilot, lambda: bool(store.query()) and store.query()[0].shown_at is not None)
        write_request(root, request_body("queued-2"))  # not shown (the first stays selected): queued
        await wait_for(pilot, lambda: len(node.person.pending()) == 2)
        with pytest.raises(Exited):
            await app.quitting._quit_after_hangup()  # what SIGHUP runs
    assert at_exit == {"code": 0, "rows": [("shown-1", "pending"), ("queued-2", "pending")], "spooled": False}


async def test_an_app_ending_while_serving_runs_leaves_the_history_open_for_it(tmp_path: Path) -> None:
    root, state = tmp_path / "forwarding", tmp_path / "state"
    store = HistoryStore.in_state_dir(state)
    held = HeldAt("arrived")
    node = attended_node(tmp_path, store, permission={"bash": {"git push *": "allow"}}, fault=held)
    app = AuthorizerApp(node, UiSettings(input_grace_ms=0, double_press=False))
    async with app.run_test(size=(140, 45)):
        request = write_request(root, request_body("ruled-1"))
        await until(held.entered.is_set, what="the rule's answer held on the disk thread")
        app.exit(1)  # not the quit key: serving was never stopped
    node.close()  # the app command's last step
    held.release.set()
    response = request.parent.parent / "responses" / "ruled-1.json"
    await until(response.exists, what="the held batch to finish")
    assert json.loads(response.read_bytes())["approved"] is True
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT request_id, verdict FROM asks").fetchall() == [("ruled-1", "approved")]
