"""Signal -> process gone: `demo` and the app in a real pty, ended by a hang-up or SIGTERM.

Run with `uv run python -m bench.bench_signals [RUNS]`. Each run starts the command in a pty
(120x40) on a temporary agent dir, forwarding root and state dir (never ~/.pi), waits for the
queue's first frame and one more second, then either closes the terminal (the master side) or sends
SIGTERM, and times until the process has exited; the exit code is reported too (0: the graceful
quit finished; 128+signal: the watchdog forced the exit). Target: under 1 s.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SESSION = "bench-signals"


def pending_ask(root: Path) -> None:
    folder = root / "sessions" / SESSION
    (folder / "requests").mkdir(parents=True)
    (folder / "responses").mkdir()
    body = {"id": "waiting", "createdAt": time.time() * 1000, "requesterSessionId": "child",
            "targetSessionId": SESSION, "requesterAgentName": "builder", "message": "run make?",
            "surface": "bash", "value": "make"}
    (folder / "requests" / "waiting.json").write_text(json.dumps(body))


def one_run(command: str, how: str) -> tuple[float, int]:
    tmp = Path(tempfile.mkdtemp(prefix="pi-authorizer-bench-signals-"))
    (tmp / "tmp").mkdir()
    if command == "demo":
        argv = ["demo", "--pause", "0.05"]
    else:
        pending_ask(tmp / "root")
        argv = ["app", "--session", SESSION, "--forwarding-root", str(tmp / "root"), "--state-dir",
                str(tmp / "state"), "--agent-dir", str(tmp / "agent"), "--project", str(tmp / "project")]
    env = {**os.environ, "HOME": str(tmp / "home"), "PI_CODING_AGENT_DIR": str(tmp / "agent"),
           "TMPDIR": str(tmp / "tmp"), "TERM": "xterm-256color"}
    pid, master = pty.fork()
    if pid == 0:
        os.chdir(REPO)
        os.execve(sys.executable, [sys.executable, "-m", "tui.cli", *argv], env)  # noqa: S606
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    seen, painted_at = b"", None
    while painted_at is None or time.monotonic() < painted_at + 1.0:
        if select.select([master], [], [], 0.05)[0]:
            seen = (seen + os.read(master, 65536))[-4096:]
            if painted_at is None and b"Pending asks" in seen:
                painted_at = time.monotonic()
    start = time.perf_counter()
    if how == "hangup":
        os.close(master)
    else:
        os.kill(pid, signal.SIGTERM)
    while True:
        if how != "hangup" and select.select([master], [], [], 0)[0]:
            with contextlib.suppress(OSError):
                os.read(master, 65536)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            elapsed = time.perf_counter() - start
            break
        time.sleep(0.002)
    if how != "hangup":
        os.close(master)
    return elapsed, os.waitstatus_to_exitcode(status)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for command in ("demo", "app"):
        for how in ("hangup", "sigterm"):
            results = [one_run(command, how) for _ in range(runs)]
            times = [t for t, _ in results]
            codes = sorted({c for _, c in results})
            print(f"{command:<5} {how:<8} median {statistics.median(times):.3f} s   max {max(times):.3f} s   "
                  f"exit codes {codes}   (n={runs}; target < 1 s)")


if __name__ == "__main__":
    main()
