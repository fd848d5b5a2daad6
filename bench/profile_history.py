"""Where the history's share of `serve`'s CPU goes in a burst: `bench.profile_serve`'s py-spy run, with
the samples inside `core/history/` split by the history function on the stack (innermost first) and
by what it was doing there (SQLite, JSON, its own Python).

Run: `uv run python -m bench.profile_history [--asks 10000] [--dir /dev/shm] [--rounds 1]`.
Printed per round: the burst's rate and CPU per ask (with the load average), the history's share of
the busy samples, that share as µs per ask (share × CPU per ask), and the history's functions.
"""

from __future__ import annotations

import argparse
import collections
import os
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from bench.bench_race import Server, Writer, running
from bench.roundtrip import base_request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--asks", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="where the root is made (e.g. /dev/shm)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--py-spy", default="uvx py-spy", help="the py-spy command")
    args = parser.parse_args()
    for _ in range(args.rounds):
        one_round(args.asks, args.dir, args.py_spy)


def one_round(asks: int, where: str | None, py_spy: str) -> None:
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        server = Server("serve (history)", reference=False, history=True)
        with running(server, Path(tmp)) as (session, pgid):
            writer = Writer(session, base_request, "inotify", pgid)
            raw = Path(tmp) / "profile.txt"
            command = [*shlex.split(py_spy), "record", "--pid", str(pgid), "--threads", "--nonblocking",
                       "--rate", "250", "--format", "raw", "--output", str(raw)]
            spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(2.0)  # py-spy attached
            result = writer.burst(asks)
            spy.send_signal(signal.SIGINT)
            _, err = spy.communicate(timeout=60)
            if not raw.exists():
                raise RuntimeError(f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}")
            text = raw.read_text()
    total, history, functions, doing = split(text)
    share = history / total if total else 0.0
    print(f"burst of {asks:,}: {result.rate:,.0f}/s, CPU per ask {result.server_cpu_us:.0f} µs "
          f"({result.server_user_us:.0f} user), load {os.getloadavg()[0]:.2f}")
    print(f"  history: {share:.1%} of {total} busy samples = {share * result.server_cpu_us:.0f} µs per ask")
    for name, count in functions.most_common(12):
        print(f"    {count / total:6.1%}  {name}")
    for name, count in doing.most_common():
        print(f"    {count / total:6.1%}  (in the history) {name}")


def split(text: str) -> tuple[int, int, collections.Counter[str], collections.Counter[str]]:
    """(busy samples, those with a history frame, per innermost history function, per activity)."""
    total = history = 0
    functions: collections.Counter[str] = collections.Counter()
    doing: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        inside = [i for i, frame in enumerate(frames) if "core/history/" in frame]
        if not inside:
            continue
        history += count
        innermost = inside[-1]
        functions[frames[innermost].split(" (")[0]] += count
        below = frames[innermost + 1 :]
        if any("json/" in frame for frame in below):
            doing["json"] += count
        elif any("pydantic" in frame or "core/wire/" in frame for frame in below):
            doing["wire (encode/decode)"] += count
        elif below:
            doing["other callees"] += count
        else:
            doing["own frame (incl. SQLite C calls)"] += count
    return total, history, functions, doing


if __name__ == "__main__":
    main()
