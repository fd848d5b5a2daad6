"""A real `serve` killed at each step of answering, then restarted: every ask answered exactly once.

The kill is the test-only `PI_AUTHORIZER_TEST_CRASH_AT` hook (`os._exit(137)`: no cleanup, no
flush, like SIGKILL) at an exact step; the restart runs without it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.history.store import CRASH_ENV, CRASH_STEPS
from core.liveness import heartbeat_path
from tests.helpers import poll_until, response_path, session_dir, write_request
from tests.history.support import S

REPO = Path(__file__).resolve().parents[2]


def serve(tmp_path: Path, crash_at: str | None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at:
        env[CRASH_ENV] = crash_at
    (tmp_path / "agent").mkdir(exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "tui.cli",
        "serve",
        "--session",
        S,
        "--forwarding-root",
        str(tmp_path / "root"),
        "--state-dir",
        str(tmp_path / "state"),
        "--on-ask",
        "deny",
        "--agent-dir",
        str(tmp_path / "agent"),
        "--project",
        str(tmp_path),
    ]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def serving_pid(root: Path) -> int | None:
    """The pid in the session's heartbeat (the killed run leaves its own behind)."""
    try:
        pid = json.loads(heartbeat_path(root, S).read_text()).get("pid")
    except (OSError, ValueError):
        return None
    return pid if isinstance(pid, int) else None


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(10)


# What must be on disk, and in the history, right after the kill at each step.
AFTER_CRASH = {
    "arrived": {"request": True, "response": False, "verdict": False},
    "recorded": {"request": True, "response": False, "verdict": True},
    "linked": {"request": True, "response": True, "verdict": True},
    "deleted": {"request": False, "response": True, "verdict": True},
}


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_killed_at_each_step_answers_once_after_restart(tmp_path: Path, step: str) -> None:
    request = write_request(tmp_path / "root", S, "r1")
    response = response_path(tmp_path / "root", S, "r1")
    first = serve(tmp_path, step)
    assert first.wait(20) == 137, first.stderr.read() if first.stderr else b""

    expected = AFTER_CRASH[step]
    assert (request.exists(), response.exists()) == (expected["request"], expected["response"])
    history = HistoryStore.in_state_dir(tmp_path / "state")
    [row] = history.query()
    assert (row.verdict is not None) == expected["verdict"]
    published = response.read_bytes() if response.exists() else None
    recorded = row.response
    history.close()

    second = serve(tmp_path, None)
    try:
        poll_until(lambda: serving_pid(tmp_path / "root") == second.pid)
    finally:
        # Its stop signal is handled from before the heartbeat, and `run()` finishes its first scan
        # before it honours a stop: once it has exited, any second answer would be on disk.
        stop(second)
    assert response.exists() and not request.exists()

    body = response.read_bytes()
    if published is not None:
        assert body == published  # never rewritten
    if recorded is not None:
        assert body == recorded  # the verdict recorded before the kill, not a second judgment
    leftovers = sorted(p.name for p in (session_dir(tmp_path / "root", S) / "responses").iterdir())
    assert leftovers == ["r1.json"]
    history = HistoryStore.in_state_dir(tmp_path / "state")
    [row] = history.query()
    assert (row.outcome, row.verdict, row.written) == ("fail-safe", "denied_with_reason", 1)
    assert row.response == body
    assert row.ended_at is not None


def test_the_republish_window_is_bounded_to_the_same_bytes_once(tmp_path: Path) -> None:
    """The one window left (documented in docs/reliability.md): killed after `link()` and before the
    history notes it, while the child consumes the response in that instant. The restart cannot tell
    "never linked" from "linked and consumed", so it publishes the RECORDED bytes once more: the same
    verdict, never a new judgment, and the request is then removed."""
    request = write_request(tmp_path / "root", S, "r1")
    response = response_path(tmp_path / "root", S, "r1")
    first = serve(tmp_path, "linked")
    assert first.wait(20) == 137
    published = response.read_bytes()
    response.unlink()  # the child read it and removed it; its request is still there
    second = serve(tmp_path, None)
    try:
        poll_until(lambda: response.exists() and not request.exists())
    finally:
        stop(second)
    assert response.read_bytes() == published
    # The request is gone with this publication, so nothing can be published a third time.
    assert sorted(p.name for p in response.parent.iterdir()) == ["r1.json"]
    history = HistoryStore.in_state_dir(tmp_path / "state")
    [row] = history.query()
    assert (row.written, row.response) == (1, published)
