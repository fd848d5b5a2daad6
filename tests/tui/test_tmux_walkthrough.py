"""A first-hour walkthrough as a newcomer sees it: the real `pi-authorizer app` in tmux at 80×24 and
120×40, real request files written as a child writes them, keys sent to the pane, the response read
back; then the rough edges a newcomer hit on the first day, each walked again: keys after `PgDn` `h`
`esc`, the keys a 20.7.3 ask is offered, a filter hiding every ask, help's `End`, a child that gave
up and removed its folder.

Skipped where tmux is missing (`scripts/tmux_walkthrough.py` is the long version, with real 20.7.3
children, several sizes and a terminal close).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import poll_until
from tests.tui.support import read_response, request_body, requests_dir, responses_dir, write_request

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.timeout(120),  # a hang guard, not a speed check
]
SESSION = "walkthrough-1"


class Pane:
    """One tmux session of its own (its own socket), of the size the test asks for."""

    def __init__(self, base: Path) -> None:
        self.socket = str(base / "tmux.sock")
        self.name = "walk"

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True,
                              check=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def wait(self, pattern: str) -> str:
        found: list[str] = []

        def seen() -> bool:
            text = self.screen()
            found[:] = [text]
            return re.search(pattern, text) is not None

        try:
            poll_until(seen, what=f"{pattern!r} on screen")
        except AssertionError:
            raise AssertionError(f"never saw {pattern!r}; the screen:\n{found[0] if found else ''}") from None
        return found[0]

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key)


@pytest.fixture(params=[(80, 24), (120, 40)], ids=["80x24", "120x40"])
def pane(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Pane, Path]]:
    width, height = request.param
    agent = tmp_path / "agent"
    root = agent / "sessions" / "permission-forwarding"
    root.mkdir(parents=True)
    (tmp_path / "project").mkdir()
    app = [sys.executable, "-m", "tui.cli", "app", "--session", SESSION, "--state-dir",
           str(tmp_path / "state"), "--agent-dir", str(agent), "--project", str(tmp_path / "project"),
           "--grace-ms", "0"]
    pane = Pane(tmp_path)
    env = f"PI_CODING_AGENT_DIR={agent}"
    pane.tmux("new-session", "-d", "-s", pane.name, "-x", str(width), "-y", str(height), "-c",
              str(Path(__file__).resolve().parents[2]), "env", env, f"HOME={os.environ['HOME']}", *app)
    try:
        yield pane, root
    finally:
        subprocess.run(["tmux", "-S", pane.socket, "kill-server"], capture_output=True, check=False)


def test_a_newcomer_sees_what_is_served_decides_and_the_child_reads_it(
    pane: tuple[Pane, Path],
) -> None:
    tmux, root = pane
    # The empty queue says which session it serves and the line a child needs.
    empty = tmux.wait(r"Serving session")
    assert SESSION in empty and f"PI_SUBAGENT_PARENT_SESSION={SESSION} \\" in empty  # never cut in the id
    # Ctrl+C does not quit, and says so in plain words.
    tmux.keys("C-c")
    said = tmux.wait(r"to quit")
    assert "[b]" not in said and "[/b]" not in said

    write_request(root, request_body("walk-1", value="git status --short", target=SESSION), SESSION)
    shown = tmux.wait(r"git status")
    assert "▶" in shown  # the selected row is marked, not only coloured

    def approved() -> bool:
        # Double press: the first y arms, the second commits; a y read before the ask was painted
        # counts for nothing, so y goes on being pressed until the child has its answer.
        if read_response(root, "walk-1", SESSION) is not None:
            return True
        tmux.keys("y")
        return False

    poll_until(approved, what="the response")
    response = read_response(root, "walk-1", SESSION)
    assert response is not None and response["state"] == "approved"

    # Help on the history view opens at the history view's keys.
    tmux.keys("h")
    tmux.wait(r"this run's decisions|asks ·")
    tmux.keys("?")
    tmux.wait(r"On this screen: History view")
    tmux.keys("Escape", "Escape")
    tmux.wait(r"Serving session")
    tmux.keys("q")  # nothing pending: it quits at once

    def ended() -> bool:
        return subprocess.run(["tmux", "-S", tmux.socket, "has-session", "-t", tmux.name],
                              capture_output=True, check=False).returncode != 0

    poll_until(ended, what="the app to quit")


def press_until_answered(tmux: Pane, root: Path, name: str, key: str = "y") -> dict[str, object]:
    """Press `key` until the child has its answer (a key read before the ask was painted counts for
    nothing); the hang guard fails a key that never counts."""

    def answered() -> bool:
        if read_response(root, name, SESSION) is not None:
            return True
        tmux.keys(key)
        return False

    try:
        poll_until(answered, what=f"the response to {name}")
    except AssertionError:
        raise AssertionError(f"{name} was never answered; the screen:\n{tmux.screen()}") from None
    response = read_response(root, name, SESSION)
    assert response is not None
    return response


def test_the_rough_edges_of_the_first_day(pane: tuple[Pane, Path]) -> None:
    tmux, root = pane
    tmux.wait(r"Serving session")
    # A 20.7.3 ask: only the keys that can act on it are offered (no w, no R, no s without a suggestion).
    write_request(root, request_body("old-1", value="make lint", target=SESSION, facts=False,
                                     suggestion=False), SESSION)
    tmux.wait(r"NO CHILD-FIXED FACTS")

    def key_bar() -> str:
        return "\n".join([line for line in tmux.screen().splitlines() if line.strip()][-3:])

    poll_until(lambda: "R Rule" not in key_bar(), what="the footer without R")  # it follows the ask
    bar = key_bar()
    assert " y " in bar and " n " in bar and " r " in bar
    assert " w " not in bar and " s " not in bar
    # A filter hiding every ask says so (not "No pending asks").
    tmux.keys("/")
    tmux.wait(r"filter: agent:NAME")
    tmux.tmux("send-keys", "-t", tmux.name, "-l", "zzz-none")
    tmux.keys("Enter")
    tmux.wait(r"1 pending, none match the filter")
    tmux.keys("Escape")
    tmux.wait(r"NO CHILD-FIXED FACTS")
    assert press_until_answered(tmux, root, "old-1")["state"] == "approved"

    # PgDn (the detail's header scrolled out), h, esc: the keys count again.
    long = request_body("long-1", value="npm test -- " + "--case " * 60, target=SESSION)
    write_request(root, long, SESSION)
    tmux.wait(r"npm test")
    tmux.keys("PageDown", "PageDown", "PageDown", "h")
    tmux.wait(r"this run's decisions|asks ·")
    tmux.keys("Escape")
    tmux.wait(r"Ask 1/1")  # the queue again (its detail's header), not the history listing it
    assert press_until_answered(tmux, root, "long-1")["state"] == "approved"

    # A child past its deadline gives up and removes the folders it emptied: its ask leaves the queue,
    # withdrawn, and says so.
    past = time.time() * 1000 - 11 * 60_000  # created 11 minutes ago: its 10 minutes are up
    gone = write_request(root, request_body("gone-1", value="git fetch", target=SESSION, created_at=past),
                         SESSION)
    tmux.wait(r"git fetch")
    gone.unlink()
    for folder in (requests_dir(root, SESSION), responses_dir(root, SESSION), gone.parent.parent):
        with contextlib.suppress(OSError):
            folder.rmdir()
    tmux.wait(r"Withdrawn by the child|withdrawn")
    tmux.wait(r"Serving session")

    # Help: End reaches its last line on one press, and the queue's keys are not shown under it.
    tmux.keys("?")
    tmux.wait(r"Keys")
    assert "approve once" not in tmux.screen()
    tmux.keys("End")
    tmux.wait(r"esc / \? : close")
    tmux.keys("Escape")
    tmux.wait(r"Serving session")
    tmux.keys("q")
