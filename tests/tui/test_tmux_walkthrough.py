"""A first-hour walkthrough as a newcomer sees it: the real `pi-authorizer app` in tmux at 80×24, real
request files written as a child writes them, keys sent to the pane, the response read back.

Skipped where tmux is missing (`scripts/tmux_walkthrough.py` is the long version, with real 20.7.3
children, several sizes and a terminal close).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import poll_until
from tests.tui.support import read_response, request_body, write_request

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.timeout(120),  # a hang guard, not a speed check
]
SESSION = "walkthrough-1"


class Pane:
    """One tmux session of its own (its own socket), 80×24."""

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


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[tuple[Pane, Path]]:
    agent = tmp_path / "agent"
    root = agent / "sessions" / "permission-forwarding"
    root.mkdir(parents=True)
    (tmp_path / "project").mkdir()
    app = [sys.executable, "-m", "tui.cli", "app", "--session", SESSION, "--state-dir",
           str(tmp_path / "state"), "--agent-dir", str(agent), "--project", str(tmp_path / "project"),
           "--grace-ms", "0"]
    pane = Pane(tmp_path)
    env = f"PI_CODING_AGENT_DIR={agent}"
    pane.tmux("new-session", "-d", "-s", pane.name, "-x", "80", "-y", "24", "-c",
              str(Path(__file__).resolve().parents[2]), "env", env, f"HOME={os.environ['HOME']}", *app)
    try:
        yield pane, root
    finally:
        subprocess.run(["tmux", "-S", pane.socket, "kill-server"], capture_output=True, check=False)


def test_a_newcomer_at_80x24_sees_what_is_served_decides_and_the_child_reads_it(
    pane: tuple[Pane, Path],
) -> None:
    tmux, root = pane
    # The empty queue says which session it serves and the line a child needs.
    empty = tmux.wait(r"Serving session")
    assert SESSION in empty and "PI_SUBAGENT_PARENT_SESSION=" in empty
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
