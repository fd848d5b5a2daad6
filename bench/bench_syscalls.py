"""System calls per ask of each contender in one burst: where the kernel's share of an ask goes.

Run: `uv run python -m bench.bench_syscalls [--burst N] [--dir DIR] [--facts yes|no] [CONTENDER ...]`
(contenders: reference, floor, serve; needs `strace`). Each contender is started on a fresh root as
`bench.bench_race` starts it; `strace -c -f` is attached to every process of its group; a burst of N
is renamed in at once and awaited; the counts are divided by N. strace slows every contender several
times over: the counts are the figure, never the rates.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_race import FLOOR, REFERENCE, Body, Server, Writer, running, with_facts
from bench.roundtrip import base_request

CONTENDERS = {"reference": REFERENCE, "floor": FLOOR, "serve": Server("serve", reference=False, history=True)}


def group_pids(pgid: int) -> list[str]:
    """The live processes of the process group `pgid` (the reference runs `node` under `tsx`)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                found.append(entry)
    return found


def counted(server: Server, body: Body, size: int, where: str) -> dict[str, tuple[float, float]]:
    """{syscall: (calls per ask, failed calls per ask)} of `server` over one burst of `size`."""
    with tempfile.TemporaryDirectory(dir=where) as tmp, running(server, Path(tmp)) as (session, pgid):
        out = Path(tmp) / "strace.txt"
        command = ["strace", "-c", "-f", "-o", str(out)]
        for pid in group_pids(pgid):
            command += ["-p", pid]
        tracer = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached (strace gives no sign of it)
        Writer(session, body, "inotify").burst(size)
        time.sleep(0.3)  # the last removals
        tracer.send_signal(signal.SIGINT)
        tracer.wait(30)
        counts: dict[str, tuple[float, float]] = {}
        for line in out.read_text().splitlines()[2:]:
            parts = line.split()
            if len(parts) >= 5 and parts[3].isdigit() and parts[-1] != "total":
                failed = int(parts[4]) if len(parts) == 6 else 0
                counts[parts[-1]] = (int(parts[3]) / size, failed / size)
        return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("contenders", nargs="*", metavar="CONTENDER", help=", ".join(CONTENDERS))
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the roots are made")
    parser.add_argument("--facts", choices=("yes", "no"), default="yes")
    args = parser.parse_args()
    if shutil.which("strace") is None:
        sys.exit("bench_syscalls needs strace")
    body = with_facts if args.facts == "yes" else base_request
    print(f"system calls per ask, a burst of {args.burst:,} (facts: {args.facts}), roots in {args.dir}")
    for name in args.contenders or list(CONTENDERS):
        if name not in CONTENDERS:
            sys.exit(f"no contender {name!r}: {', '.join(CONTENDERS)}")
        counts = counted(CONTENDERS[name], body, args.burst, args.dir)
        ranked = sorted(counts.items(), key=lambda item: -item[1][0])
        shown = [f"{call} {per:.2f}" + (f" ({failed:.2f} failed)" if failed >= 0.01 else "")
                 for call, (per, failed) in ranked if per >= 0.01]
        print(f"  {name}: {sum(per for per, _ in counts.values()):.2f}: {', '.join(shown)}")


if __name__ == "__main__":
    main()
