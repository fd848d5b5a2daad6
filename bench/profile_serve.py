"""Where `serve`'s CPU goes in a burst: py-spy samples of every thread, summed per stage.

Run: `uv run python -m bench.profile_serve [--asks 10000] [--facts] [--dir /dev/shm] [--py-spy CMD]`
(py-spy is not a project dependency: by default it is run as `uvx py-spy`).

`serve` (history on) is started on a fresh root as `bench.bench_race` starts it, the burst's request
files are written to a staging folder, py-spy attaches (`record --threads --nonblocking --format
raw`, 250 samples/s, idle threads left out), the files are renamed into the inbox at once and the
writer waits for every response. Each sample is a stack; it is counted once for every stage (a
function of this project, below) found in it, and once for the thread it ran on. Printed: the
share of the busy samples per thread, per stage (inclusive: a stage's callees count for it) and
the hottest frames of anyone (self time).
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

from bench.bench_race import Server, Writer, running, with_facts
from bench.roundtrip import SESSION, base_request

#: (label, substring of a py-spy frame `function (file:line)`), in the order of an ask's path.
STAGES = (
    ("intake: list, read, look up", "core/serving/intake.py"),
    ("watch: inotify", "core/forwarding/"),
    ("drain (the loop's trip)", "core/serving/drain.py"),
    ("the wire: parse, validate, encode", "core/wire/"),
    ("judgment (serving's side)", "serving/judgment.py"),
    ("judge (recorded authority, rules)", "core/judging/"),
    ("rules", "core/rules/"),
    ("pipeline (route of one file)", "core/serving/pipeline.py"),
    ("answering (hand-off to the publisher)", "core/serving/answering"),
    ("publisher (batch, stages)", "core/serving/publisher.py"),
    ("verdict records", "core/serving/verdicts.py"),
    ("records", "serving/records.py"),
    ("history: transactions, rows", "core/history/"),
    ("sqlite3 calls", "sqlite3"),
    ("disk writer (stage, sync, place)", "core/disk/"),
    ("events to listeners", "core/serving/events.py"),
    ("logging", "logging/__init__.py"),
    ("json", "json/"),
    ("pydantic", "pydantic"),
    ("asyncio loop", "asyncio/"),
    ("thread pool hand-offs", "concurrent/futures/"),
    ("selector waits (epoll)", "selectors.py"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--asks", type=int, default=10_000)
    parser.add_argument("--facts", action="store_true", help="asks a rule allows (default: fail-safe deny)")
    parser.add_argument("--dir", default=None, help="where the root is made (e.g. /dev/shm)")
    parser.add_argument("--py-spy", default="uvx py-spy", help="the py-spy command")
    parser.add_argument("--top", type=int, default=25, help="hottest frames printed")
    parser.add_argument("--gil", action="store_true",
                        help="only samples of the thread holding the interpreter lock (its Python CPU, "
                             "not the waits for the lock)")
    args = parser.parse_args()
    body = with_facts if args.facts else base_request
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        server = Server("serve (history)", reference=False, history=True)
        with running(server, Path(tmp)) as (session, pgid):
            writer = Writer(session, body, "inotify", pgid)
            raw = Path(tmp) / "profile.txt"
            command = [*shlex.split(args.py_spy), "record", "--pid", str(pgid), "--threads", "--nonblocking",
                       "--rate", "250", "--format", "raw", "--output", str(raw)]
            command += ["--gil"] if args.gil else []
            spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(2.0)  # py-spy attached
            result = writer.burst(args.asks)
            spy.send_signal(signal.SIGINT)
            _, err = spy.communicate(timeout=60)
            if not raw.exists():
                raise RuntimeError(f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}")
            text = raw.read_text()
    print(f"burst of {args.asks:,} ({'facts, rule allow' if args.facts else 'no facts'}) in {SESSION}:"
          f" {result.rate:,.0f}/s, CPU per ask {result.server_cpu_us:.0f} µs"
          f" ({result.server_user_us:.0f} user), load {os.getloadavg()[0]:.1f}")
    report(text, args.top)


def report(text: str, top: int) -> None:
    total = 0
    threads: collections.Counter[str] = collections.Counter()
    stages: collections.Counter[str] = collections.Counter()
    hottest: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        thread = next((f for f in frames if f.startswith("thread ")), "?")
        total += count
        threads[thread] += count
        for label, needle in STAGES:
            if any(needle in frame for frame in frames):
                stages[label] += count
        hottest[frames[-1]] += count
    if not total:
        print("no samples")
        return
    print(f"{total} busy samples (250/s; a sample is one thread's stack)")
    print("per thread:")
    for thread, count in threads.most_common():
        print(f"  {count / total:6.1%}  {thread}")
    print("per stage (inclusive; a sample counts for every stage on its stack):")
    for label, _ in STAGES:
        if stages[label]:
            print(f"  {stages[label] / total:6.1%}  {label}")
    print("hottest frames (self):")
    for frame, count in hottest.most_common(top):
        print(f"  {count / total:6.1%}  {frame}")


if __name__ == "__main__":
    main()
