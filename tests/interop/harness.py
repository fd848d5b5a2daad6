"""Process helpers for the interop suite: run the node driver scripts and `pi-authorizer serve`.

Every process is started in its own session (so it leads a new process group), every wait has
a timeout, and every helper kills the whole group it started on the way out, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(__file__).resolve().parent / "node"

# Generous bounds: a driver script starts in ~0.5 s, serve in a few seconds at most.
SCRIPT_TIMEOUT_S = 30.0
SERVE_READY_TIMEOUT_S = 20.0
SERVE_STOP_TIMEOUT_S = 10.0


class HarnessError(AssertionError):
    """A driver or served process misbehaved (timeout, bad output, early exit)."""


def kill_group(proc: subprocess.Popen[Any], sig: int = signal.SIGKILL) -> None:
    """Signal the process group `proc` leads (it was started with start_new_session=True)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def reap(proc: subprocess.Popen[Any], grace_s: float = SERVE_STOP_TIMEOUT_S) -> None:
    """SIGTERM the group, wait up to `grace_s`, then SIGKILL the group and wait."""
    if proc.poll() is None:
        kill_group(proc, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    # Whatever the leader did, make sure nothing it spawned survives.
    kill_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def wait_until(
    predicate: Callable[[], bool],
    timeout_s: float,
    what: str,
    interval_s: float = 0.05,
    alive: subprocess.Popen[Any] | None = None,
    describe: Callable[[], str] = lambda: "",
) -> None:
    """Poll `predicate` until true; raise HarnessError after `timeout_s` or if `alive` exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return
        if alive is not None and alive.poll() is not None:
            raise HarnessError(f"process exited ({alive.returncode}) while waiting for {what}\n{describe()}")
        if time.monotonic() >= deadline:
            raise HarnessError(f"timed out after {timeout_s}s waiting for {what}\n{describe()}")
        time.sleep(interval_s)


@dataclass(frozen=True)
class ScriptResult:
    returncode: int
    stdout: str
    stderr: str

    def json_line(self) -> Any:
        """The single JSON line the driver prints on stdout."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        if self.returncode != 0 or len(lines) != 1:
            raise HarnessError(
                f"driver exited {self.returncode} with {len(lines)} stdout line(s)\n"
                f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
            )
        return json.loads(lines[0])

    def log_events(self) -> list[dict[str, Any]]:
        """The package's review/debug events the driver logged on stderr (JSON lines)."""
        events: list[dict[str, Any]] = []
        for line in self.stderr.splitlines():
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    events.append(value)
        return events


@dataclass
class RunningScript:
    """A driver script still running in the background (see NodeDriver.start)."""

    proc: subprocess.Popen[str]
    stdout_path: Path
    stderr_path: Path

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait(self, timeout_s: float = SCRIPT_TIMEOUT_S) -> ScriptResult:
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            reap(self.proc, grace_s=1)
            raise HarnessError(
                f"driver did not finish within {timeout_s}s\nstderr:\n{self.stderr_text()}"
            ) from exc
        return ScriptResult(
            self.proc.returncode,
            self.stdout_path.read_text(encoding="utf-8"),
            self.stderr_text(),
        )


@dataclass(frozen=True)
class NodeDriver:
    """Runs the TypeScript drivers in tests/interop/node with tsx under node."""

    node: str
    node_dir: Path = NODE_DIR

    @property
    def tsx_cli(self) -> Path:
        return self.node_dir / "node_modules" / "tsx" / "dist" / "cli.mjs"

    def command(self, script: str, args: Sequence[str]) -> list[str]:
        return [self.node, str(self.tsx_cli), str(self.node_dir / script), *args]

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "NODE_OPTIONS"))}
        env.update(extra or {})
        return env

    def run(
        self,
        script: str,
        args: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = SCRIPT_TIMEOUT_S,
    ) -> ScriptResult:
        """Run a driver to completion (bounded), killing its process group afterwards."""
        proc = subprocess.Popen(
            self.command(script, args),
            cwd=self.node_dir,
            env=self.env(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(input=stdin, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            reap(proc, grace_s=1)
            out, err = proc.communicate()
            raise HarnessError(
                f"{script} did not finish within {timeout_s}s\nstdout:\n{out}\nstderr:\n{err}"
            ) from exc
        finally:
            kill_group(proc)
        return ScriptResult(proc.returncode, out, err)

    @contextlib.contextmanager
    def start(
        self,
        script: str,
        args: Sequence[str],
        workdir: Path,
        *,
        env: Mapping[str, str] | None = None,
    ) -> Iterator[RunningScript]:
        """Start a driver in the background; its process group is killed when the block exits."""
        workdir.mkdir(parents=True, exist_ok=True)
        stdout_path = workdir / f"{script}.{time.monotonic_ns()}.stdout"
        stderr_path = stdout_path.with_suffix(".stderr")
        with stdout_path.open("w") as out, stderr_path.open("w") as err:
            proc = subprocess.Popen(
                self.command(script, args),
                cwd=self.node_dir,
                env=self.env(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                text=True,
                start_new_session=True,
            )
        try:
            yield RunningScript(proc, stdout_path, stderr_path)
        finally:
            reap(proc, grace_s=1)


def child_ask_args(
    forwarding_root: Path,
    requester_session_id: str,
    agent_name: str,
    details: Mapping[str, Any],
    *,
    via_gate: bool = False,
) -> list[str]:
    args = [str(forwarding_root), requester_session_id, agent_name, json.dumps(details)]
    return [*args, "--via-gate"] if via_gate else args


def child_env(target_session_id: str) -> dict[str, str]:
    """What a spawner sets for a 20.7.3 child: a subagent hint and the parent (target) id."""
    return {"PI_SUBAGENT_PARENT_SESSION": target_session_id, "PI_IS_SUBAGENT": "1"}


def serve_command() -> list[str]:
    """The installed console script when present, else the same entry point through python -c."""
    script = Path(sys.executable).parent / "pi-authorizer"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from tui.cli import main; sys.exit(main())"]


@dataclass
class ServeProcess:
    proc: subprocess.Popen[str]
    stderr_path: Path
    heartbeats: list[Path] = field(default_factory=list)

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait_for_log(self, needle: str, timeout_s: float = 10.0) -> None:
        wait_until(
            lambda: needle in self.stderr_text(),
            timeout_s,
            f"serve stderr to mention {needle!r}",
            alive=self.proc,
            describe=lambda: f"serve stderr:\n{self.stderr_text()}",
        )


@contextlib.contextmanager
def serve(
    session_ids: Sequence[str],
    forwarding_root: Path,
    state_dir: Path,
    on_ask: str,
    workdir: Path,
    heartbeat_names: Sequence[str],
    extra_args: Sequence[str] = (),
) -> Iterator[ServeProcess]:
    """Run `pi-authorizer serve` until the block exits; ready once every heartbeat file exists.

    `heartbeat_names` are the expected `serving/<enc(id)>.json` names (the caller encodes, so a
    wrong encoding in the CLI shows up as a readiness timeout with the serve log attached).
    """
    cmd = [*serve_command(), "serve"]
    for sid in session_ids:
        cmd += ["--session", sid]
    cmd += ["--forwarding-root", str(forwarding_root), "--state-dir", str(state_dir)]
    cmd += ["--on-ask", on_ask, *extra_args]
    workdir.mkdir(parents=True, exist_ok=True)
    stderr_path = workdir / f"serve.{time.monotonic_ns()}.stderr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
    env["PYTHONUNBUFFERED"] = "1"
    with stderr_path.open("w") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            start_new_session=True,
        )
    served = ServeProcess(proc, stderr_path)
    try:
        served.heartbeats = [forwarding_root / "serving" / name for name in heartbeat_names]
        wait_until(
            lambda: all(p.is_file() for p in served.heartbeats),
            SERVE_READY_TIMEOUT_S,
            f"serve heartbeat(s) {[str(p) for p in served.heartbeats]}",
            alive=proc,
            describe=lambda: f"command: {cmd}\nserve stderr:\n{served.stderr_text()}",
        )
        yield served
    finally:
        reap(proc)


def stop_serve(served: ServeProcess, sig: int = signal.SIGTERM) -> int:
    """Send `sig` to serve itself and wait (bounded) for it to exit; returns its exit status."""
    served.proc.send_signal(sig)
    try:
        return served.proc.wait(timeout=SERVE_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        reap(served.proc, grace_s=0)
        raise HarnessError(
            f"serve did not exit within {SERVE_STOP_TIMEOUT_S}s of signal {sig}\n{served.stderr_text()}"
        ) from exc


def read_json_file(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
