"""The headless commands as a user runs them: real processes, real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from core.disk.paths import encode_session_id
from core.forwarding.liveness import HEARTBEAT_INTERVAL_S
from tests.helpers import poll_until

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(120)  # a hang guard, not a speed check

HEADLESS_AGENT = textwrap.dedent(
    """
    import json, os, sys, time
    root = os.path.join(os.environ["PI_CODING_AGENT_DIR"], "sessions", "permission-forwarding")
    target = os.environ["PI_SUBAGENT_PARENT_SESSION"]
    assert os.environ["PI_IS_SUBAGENT"] == "1"
    assert "PI_AGENT_ROUTER_PARENT_SESSION_ID" not in os.environ
    folder = os.path.join(root, "sessions", target)
    os.makedirs(os.path.join(folder, "requests"), exist_ok=True)
    os.makedirs(os.path.join(folder, "responses"), exist_ok=True)
    body = {"id": "headless-1", "createdAt": time.time() * 1000, "requesterSessionId": "me",
            "targetSessionId": target, "requesterAgentName": "main", "message": "run ls?",
            "surface": "bash", "value": "ls"}
    tmp = os.path.join(folder, "requests", "headless-1.json.1.1.tmp")
    open(tmp, "w").write(json.dumps(body))
    os.rename(tmp, os.path.join(folder, "requests", "headless-1.json"))
    response = os.path.join(folder, "responses", "headless-1.json")
    deadline = time.time() + 20
    while not os.path.exists(response) and time.time() < deadline:
        time.sleep(0.01)
    print(open(response).read())
    sys.exit(7)
    """
)


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 100  # a hang guard, not a speed check
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_run_serves_the_command_it_starts_and_returns_its_exit_code(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    root = agent_dir / "sessions" / "permission-forwarding"
    script = tmp_path / "agent.py"
    script.write_text(HEADLESS_AGENT)
    env = {**os.environ, "PI_AGENT_ROUTER_PARENT_SESSION_ID": "would-win"}
    result = cli(
        "run",
        "--session",
        "side-terminal",
        "--forwarding-root",
        str(root),
        "--create",
        "--state-dir",
        str(tmp_path / "state"),
        "--",
        sys.executable,
        str(script),
        env=env,
    )
    assert result.returncode == 7, result.stderr
    body = json.loads(result.stdout)
    assert body["state"] == "denied_with_reason" and body["decidedBy"]["kind"] == "unavailable"
    assert "request=headless-1.json" in result.stderr
    assert not (root / "serving" / "side-terminal.json").exists()


def test_run_without_a_command_explains_itself(tmp_path: Path) -> None:
    result = cli("run", "--state-dir", str(tmp_path))
    assert result.returncode == 2 and "give the command after --" in result.stderr


def test_run_with_a_missing_program_says_so(tmp_path: Path) -> None:
    result = cli(
        "run",
        "--forwarding-root",
        str(tmp_path / "root"),
        "--create",
        "--state-dir",
        str(tmp_path / "s"),
        "--",
        str(tmp_path / "no-such-program"),
    )
    assert result.returncode == 127 and "cannot start" in result.stderr


def test_serve_without_session_serves_a_stable_own_id_and_prints_the_env(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    ids: list[str] = []
    for _ in range(2):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tui.cli",
                "serve",
                "--forwarding-root",
                str(root),
                "--create",
                "--state-dir",
                str(state),
            ],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        poll_until(lambda: bool(list((root / "serving").glob("*.json"))), what="a heartbeat")
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        # A root that did not exist is created but said (once: the second run finds it), as is a
        # root outside the layout children use; a stop is said too.
        assert ("did not exist" in err) == (not ids) and "no pi child writes to" in err
        assert err.rstrip().splitlines()[-1].startswith("pi-authorizer: stopped serving pi-authorizer-")
        line = next(x for x in err.splitlines() if "PI_SUBAGENT_PARENT_SESSION=" in x)
        assert "PI_IS_SUBAGENT=1" in line
        ids.append(line.split("PI_SUBAGENT_PARENT_SESSION=")[1].split()[0])
    assert ids[0] == ids[1] and ids[0].startswith("pi-authorizer-")


def test_serve_refuses_a_session_a_live_process_serves(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "serving").mkdir(parents=True)
    heartbeat = root / "serving" / f"{encode_session_id('taken')}.json"
    stopped = threading.Event()

    def live_server() -> None:
        """Beats as a live server does: a heartbeat written once goes stale after 5 s, and on a busy
        machine the command can take longer than that to start (it then served the session)."""
        while True:
            beat = {"sessionId": "taken", "pid": os.getppid(), "updatedAt": time.time() * 1000}
            heartbeat.with_suffix(".tmp").write_text(json.dumps(beat))
            heartbeat.with_suffix(".tmp").rename(heartbeat)
            if stopped.wait(HEARTBEAT_INTERVAL_S):
                return

    beating = threading.Thread(target=live_server)
    beating.start()
    try:
        result = cli("serve", "--session", "taken", "--forwarding-root", str(root),
                     "--state-dir", str(tmp_path / "state"))
    finally:
        stopped.set()
        beating.join()
    assert result.returncode == 3
    assert f"pid {os.getppid()}" in result.stderr and "no session left to serve" in result.stderr
    assert heartbeat.exists()


def test_invalid_session_id_is_a_clear_error(tmp_path: Path) -> None:
    result = cli("serve", "--session", "unknown", "--state-dir", str(tmp_path))
    assert result.returncode == 2 and "names no session" in result.stderr


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["app"]),
        (["--session", "S1"], ["app", "--session", "S1"]),
        (["-v", "--session", "S1"], ["-v", "app", "--session", "S1"]),
        (["serve", "--session", "S1"], ["serve", "--session", "S1"]),
        (["--help"], ["--help"]),
    ],
)
def test_bare_command_line_opens_the_app(argv: list[str], expected: list[str]) -> None:
    from tui.cli import build_parser, with_default_command

    assert with_default_command(build_parser(), argv) == expected


def test_bare_command_without_a_terminal_says_to_use_serve(tmp_path: Path) -> None:
    result = cli("--session", "S1", "--state-dir", str(tmp_path))
    assert result.returncode == 2 and "use `pi-authorizer serve` headless" in result.stderr


def test_serve_reports_config_errors_at_start(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"permission": {"bash": "sometimes"}}')
    root = tmp_path / "root"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tui.cli",
            "serve",
            "--session",
            "S",
            "--forwarding-root",
            str(root),
            "--create",
            "--state-dir",
            str(tmp_path / "state"),
            "--agent-dir",
            str(agent),
            "--project",
            str(tmp_path / "p"),
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    poll_until((root / "serving" / "S.json").exists, what="the heartbeat")
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "config error" in err and str(config) in err and "permission" in err


WINDOWS = textwrap.dedent(
    """
    import sys
    sys.platform = "win32"
    for name in ("fcntl", "resource", "termios"):  # missing on Windows: importing one fails there
        sys.modules[name] = None
    from tui.entry import main
    code = main(["serve", "--session", "s"])
    print(code, sorted({m.split(".")[0] for m in sys.modules} & {"core", "textual", "rich", "pydantic"}))
    sys.exit(code)
    """
)


def test_windows_is_refused_in_one_line_before_anything_can_fail() -> None:
    result = subprocess.run([sys.executable, "-c", WINDOWS], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 1 and result.stdout.strip() == "1 []"
    assert result.stderr.count("\n") == 1 and "Windows is not supported" in result.stderr
    assert "WSL" in result.stderr and "Traceback" not in result.stderr


def test_the_entry_point_runs_the_command_line_elsewhere() -> None:
    result = subprocess.run([sys.executable, "-c", "from tui.entry import main; main(['--version'])"],
                            cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and result.stdout.startswith("pi-authorizer "), result.stderr
