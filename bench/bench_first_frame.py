"""First frame as a person sees it: `uv run pi-authorizer demo` in a real pseudo-terminal.

Run with `uv run python -m bench.bench_first_frame [RUNS]`. Each run spawns the command in a pty
(120x40), reads everything it draws, and stops the clock at the first output containing the queue's
"Pending asks" title (the first painted frame of the queue screen), then hangs up the terminal.
The first run is reported apart (cold-ish: caches may be empty); the others are warm. Also times
`python -m tui.cli demo` (no `uv run` resolution) the same way.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import statistics
import struct
import sys
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = b"Pending asks"


def time_to_frame(argv: list[str], within: float = 60.0) -> float:
    start = time.perf_counter()
    pid, master = pty.fork()
    if pid == 0:
        os.chdir(REPO)
        os.execvp(argv[0], argv)  # noqa: S606
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    seen = b""
    elapsed = float("nan")
    deadline = start + within
    try:
        while time.perf_counter() < deadline:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            seen = seen[-len(MARKER):] + data
            if MARKER in seen:
                elapsed = time.perf_counter() - start
                break
    finally:
        os.close(master)  # hang up: the app ends itself
        for _ in range(500):
            done, _status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.01)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for label, argv in (
        ("uv run pi-authorizer demo", ["uv", "run", "pi-authorizer", "demo"]),
        ("python -m tui.cli demo", [sys.executable, "-m", "tui.cli", "demo"]),
    ):
        times = [time_to_frame(argv) for _ in range(runs)]
        warm = times[1:] or times
        print(f"{label:<28} first run {times[0]:.3f} s   warm median {statistics.median(warm):.3f} s   "
              f"warm max {max(warm):.3f} s   (n={runs}; target warm < 1 s)")


if __name__ == "__main__":
    main()
