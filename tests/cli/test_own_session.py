"""One session per forwarding root, and `run` beside a server: real processes on real roots.

A `serve` for one agent dir and another for a second serve side by side, each its own id; a session
that is taken names who holds it (pid, command) and the option that serves another; `run -- CMD`
beside a server of its root's session forwards there, and alone says it serves headless.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.disk.paths import default_forwarding_root, default_state_dir
from core.forwarding.liveness import HEARTBEAT_INTERVAL_S
from tests.helpers import poll_until, readable
from tui.commands.own_session import LEGACY_SESSION_FILE, default_session_id

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)  # a hang guard, not a speed check

#: A headless child: one ask to the session in its environment, prints the response it reads.
CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    root = os.path.join(os.environ["PI_CODING_AGENT_DIR"], "sessions", "permission-forwarding")
    target = os.environ["PI_SUBAGENT_PARENT_SESSION"]
    folder = os.path.join(root, "sessions", target)
    os.makedirs(os.path.join(folder, "requests"), exist_ok=True)
    os.makedirs(os.path.join(folder, "responses"), exist_ok=True)
    body = {"id": "child-1", "createdAt": time.time() * 1000, "requesterSessionId": "me",
            "targetSessionId": target, "requesterAgentName": "main", "message": "run ls?",
            "surface": "bash", "value": "ls"}
    tmp = os.path.join(folder, "requests", "child-1.json.1.1.tmp")
    open(tmp, "w").write(json.dumps(body))
    os.rename(tmp, os.path.join(folder, "requests", "child-1.json"))
    response = os.path.join(folder, "responses", "child-1.json")
    deadline = time.time() + 60
    while not os.path.exists(response) and time.time() < deadline:
        time.sleep(0.01)
    print(open(response).read())
    """
)


def agent_root(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """An agent dir and its forwarding root, as pi lays them out (the root exists: children made it)."""
    agent = tmp_path / name
    root = agent / "sessions" / "permission-forwarding"
    root.mkdir(parents=True)
    return agent, root


@contextmanager
def serve(
    tmp_path: Path, agent: Path, state: Path, name: str, *extra: str
) -> Iterator[subprocess.Popen[str]]:
    """`serve` for `agent`'s default root (its PI_CODING_AGENT_DIR), its stderr in `<name>.log`."""
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent)}
    with (tmp_path / f"{name}.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "serve", "--state-dir", str(state), *extra],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True, start_new_session=True,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)


def said(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text(errors="replace")


def served_id(tmp_path: Path, name: str) -> str:
    poll_until(lambda: "PI_SUBAGENT_PARENT_SESSION=" in said(tmp_path, name), 60, f"{name} serving")
    line = next(x for x in said(tmp_path, name).splitlines() if "PI_SUBAGENT_PARENT_SESSION=" in x)
    return line.split("PI_SUBAGENT_PARENT_SESSION=")[1].split()[0]


def cli(*args: str, agent: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PI_CODING_AGENT_DIR": str(agent)}, timeout=100, check=False)


def test_two_roots_are_served_at_once_each_with_its_own_stable_session(tmp_path: Path) -> None:
    state = tmp_path / "state"  # one state dir, as on a machine: the ids must still differ per root
    (agent_a, root_a), (agent_b, root_b) = agent_root(tmp_path, "agent-a"), agent_root(tmp_path, "agent-b")
    with serve(tmp_path, agent_a, state, "a") as a, serve(tmp_path, agent_b, state, "b") as b:
        id_a, id_b = served_id(tmp_path, "a"), served_id(tmp_path, "b")
        assert id_a != id_b
        poll_until(lambda: (root_a / "serving").is_dir() and (root_b / "serving").is_dir(), 60, "heartbeats")
        assert a.poll() is None and b.poll() is None, said(tmp_path, "a") + said(tmp_path, "b")
        assert "not serving" not in said(tmp_path, "a") + said(tmp_path, "b")
    with serve(tmp_path, agent_a, state, "a-again") as again:
        assert served_id(tmp_path, "a-again") == id_a  # kept per root across runs
        again.send_signal(signal.SIGTERM)


def test_a_taken_session_names_its_holder_and_the_option_that_serves_another(tmp_path: Path) -> None:
    state = tmp_path / "state"
    agent, _ = agent_root(tmp_path, "agent")
    with serve(tmp_path, agent, state, "first") as first:
        served_id(tmp_path, "first")
        second = cli("serve", "--state-dir", str(state), agent=agent)
        assert first.poll() is None
    assert second.returncode == 3, second.stderr
    refused = next(line for line in second.stderr.splitlines() if "not serving" in line)
    assert f"pid {first.pid}" in refused and "tui.cli serve" in refused  # who: pid and command
    assert "--session ID" in refused


def test_run_beside_a_server_of_its_root_forwards_there(tmp_path: Path) -> None:
    state = tmp_path / "state"
    agent, _ = agent_root(tmp_path, "agent")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    # The server stands for the open app: it holds the root's session and decides (its fail-safe here).
    with serve(tmp_path, agent, state, "app") as app:
        sid = served_id(tmp_path, "app")
        result = cli("run", "--state-dir", str(state), "--", sys.executable, str(script), agent=agent)
        assert app.poll() is None
    assert result.returncode == 0, result.stderr
    assert f"pid {app.pid}" in result.stderr and f"serves {sid!r}" in result.stderr
    assert "forwards its asks there" in result.stderr
    body = json.loads(result.stdout)
    assert body["responderSessionId"] == sid
    assert "request=child-1.json" in said(tmp_path, "app")  # the server answered it, not the run


def test_run_alone_serves_headless_and_says_so_at_start(tmp_path: Path) -> None:
    agent, _ = agent_root(tmp_path, "agent")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    state = tmp_path / "state"
    result = cli("run", "--state-dir", str(state), "--", sys.executable, str(script), agent=agent)
    assert result.returncode == 0, result.stderr
    start = next(line for line in result.stderr.splitlines() if line.startswith("pi-authorizer run:"))
    assert "serves it headless" in start and "denied at once (--on-ask deny)" in start, result.stderr
    assert json.loads(result.stdout)["state"] == "denied_with_reason"


def test_the_id_earlier_versions_kept_stays_the_default_roots(tmp_path: Path) -> None:
    """One id for every root before: the default root keeps it (its env lines stay valid), others mint."""
    state = tmp_path / "state"
    state.mkdir()
    (state / LEGACY_SESSION_FILE).write_text("pi-authorizer-earlier\n")
    assert default_session_id(state, default_forwarding_root()) == "pi-authorizer-earlier"
    other = default_session_id(state, tmp_path / "elsewhere")
    assert other.startswith("pi-authorizer-") and other != "pi-authorizer-earlier"
    assert default_session_id(state, tmp_path / "elsewhere") == other


def test_processes_minting_one_roots_id_at_once_agree(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from tui.commands.own_session import default_session_id; "
            "print(default_session_id(Path(sys.argv[1]), Path(sys.argv[2])))")
    racers = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "state"), str(tmp_path / "root")],
                               cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    ids = {racer.communicate(timeout=60)[0].strip() for racer in racers}
    assert len(ids) == 1 and next(iter(ids)).startswith("pi-authorizer-")



class AppTerminal:
    """The app in a real pseudo-terminal (it needs one): keys written to it, its drawing drained."""

    def __init__(self, agent: Path, *args: str) -> None:
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "TERM": "xterm-256color",
               "TEXTUAL_ANIMATIONS": "none"}
        self.pid, self.master = pty.fork()
        if self.pid == 0:  # the child: its controlling terminal is the pty
            os.chdir(REPO)
            os.execve(sys.executable, [sys.executable, "-m", "tui.cli", "app", *args], env)  # noqa: S606
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.done = threading.Event()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while not self.done.is_set():
            ready = readable(self.master, 50)
            try:
                if ready and not os.read(self.master, 65536):
                    return
            except OSError:
                return

    def press(self, key: bytes) -> None:
        os.write(self.master, key)

    def close(self) -> int:
        """SIGTERM, as a closed session does; the exit code."""
        os.kill(self.pid, signal.SIGTERM)
        _, status = os.waitpid(self.pid, 0)
        self.done.set()
        self.reader.join()
        os.close(self.master)
        return os.waitstatus_to_exitcode(status)


def test_the_app_and_a_serve_for_two_roots_at_once_and_run_beside_the_app_is_decided_there(
    tmp_path: Path,
) -> None:
    """One state dir (the default one), two agent dirs: the app serves one root's own session, a
    `serve` the other's; `run -- CMD` for the app's root forwards there and the person's `y` decides."""
    (agent_a, root_a), (agent_b, root_b) = agent_root(tmp_path, "agent-a"), agent_root(tmp_path, "agent-b")
    state = default_state_dir()
    app = AppTerminal(agent_a, "--no-double-press", "--grace-ms", "0")
    try:
        poll_until(lambda: any((root_a / "serving").glob("*.json")), 90, "the app serving root a")
        with serve(tmp_path, agent_b, state, "b") as other:
            served_id(tmp_path, "b")
            poll_until(lambda: any((root_b / "serving").glob("*.json")), 60, "serve beating for root b")
            assert other.poll() is None and "not serving" not in said(tmp_path, "b")
            script = tmp_path / "child.py"
            script.write_text(CHILD)
            with (tmp_path / "run.out").open("w") as out, (tmp_path / "run.err").open("w") as err:
                run = subprocess.Popen(
                    [sys.executable, "-m", "tui.cli", "run", "--", sys.executable, str(script)],
                    cwd=REPO, env={**os.environ, "PI_CODING_AGENT_DIR": str(agent_a)}, stdout=out, stderr=err,
                    text=True)
            presses = iter(range(1_000_000))

            def decided() -> bool:
                if next(presses) % 25 == 0:  # the person presses y (again) until the ask is decided
                    app.press(b"y")
                return run.poll() is not None

            poll_until(decided, 90, "the person's y to reach the child")
        assert run.returncode == 0, (tmp_path / "run.err").read_text()
        assert "forwards its asks there" in (tmp_path / "run.err").read_text()
        body = json.loads((tmp_path / "run.out").read_text())
        assert body["approved"] is True and body["decidedBy"]["kind"] == "user", body
    finally:
        app.close()


def test_run_beside_a_newer_pi_serving_its_session_stands_by_and_says_so(tmp_path: Path) -> None:
    """A server known only by its heartbeat (a newer pi): `run` takes the session but leaves its asks to
    that server while it beats, and says so at start."""
    agent, root = agent_root(tmp_path, "agent")
    state = tmp_path / "state"
    sid = default_session_id(state, root)
    heartbeat = root / "serving" / f"{sid}.json"
    heartbeat.parent.mkdir()
    stopped = threading.Event()

    def beating() -> None:
        while True:
            beat = {"sessionId": sid, "pid": os.getpid(), "updatedAt": time.time() * 1000}
            heartbeat.with_suffix(".tmp").write_text(json.dumps(beat))
            heartbeat.with_suffix(".tmp").rename(heartbeat)
            if stopped.wait(HEARTBEAT_INTERVAL_S):
                return

    beater = threading.Thread(target=beating)
    beater.start()
    try:
        result = cli("run", "--state-dir", str(state), "--", "true", agent=agent)
    finally:
        stopped.set()
        beater.join()
    assert result.returncode == 0, result.stderr
    start = next(line for line in result.stderr.splitlines() if line.startswith("pi-authorizer run:"))
    assert f"another server answers session {sid} (pid {os.getpid()}" in start, result.stderr
    assert "forwards its asks there" in start and "denied at once (--on-ask deny)" in start
