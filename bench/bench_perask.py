"""Per-ask interpreter cost on the serving thread (issue 11, bursts of 10,000).

Run: `uv run python -m bench.bench_perask [--cpu N] [--profile N]`.

Micro: µs per call (best of 5 rounds) for reading a realistic request body (with and without facts),
building and encoding the response, and the served log line's untrusted parts. `--cpu N`: the CPU
time `serve` (history on) spends per ask on a burst of N (serving thread and the others, from
`/proc`, not profiled). `--profile N`:
`serve` (history on, as `bench.bench_race` starts it) under cProfile while a burst of N requests
without facts, then N with facts, is renamed in at once; prints the serving thread's top costs per ask.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.bench_race import with_facts
from bench.roundtrip import REPO, SESSION, base_request
from core.disk.paths import encode_session_id
from core.text import log_safe
from core.wire.decisions import RuleDecision
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response


def per_call_us(fn: Callable[[], object], number: int = 2000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def micro() -> None:
    plain = json.dumps(base_request("bench-000001")).encode()
    facts = json.dumps(with_facts("bench-000001")).encode()
    rule = RuleDecision(surface="bash", pattern="git *", origin="global")
    reason = "no person answered in time (fail-safe deny)"
    rows = {
        "parse_request, no facts": lambda: parse_request(plain),
        "parse_request, facts": lambda: parse_request(facts),
        "deny + encode (fail-safe)": lambda: encode_response(
            deny(responder=SESSION, at_ms=1, decided_by=None, reason=reason)),
        "approve + encode (rule)": lambda: encode_response(
            approve(responder=SESSION, at_ms=1, decided_by=rule)),
        "log_safe x3 (session, name, reason)": lambda: (
            log_safe(SESSION), log_safe("bench-000001.json"), log_safe(reason, 120)),
    }
    for name, fn in rows.items():
        print(f"{name:40s} {per_call_us(fn):8.1f} µs")


_RUNNER = """
import cProfile, pstats, sys, threading
from tui.cli import main
profiles = [cProfile.Profile()]
def each_thread(*_):  # every thread started from now on is profiled too (its own profiler)
    sys.setprofile(None)
    profiles.append(cProfile.Profile())
    profiles[-1].enable()
if sys.argv[2] == "--threads":
    threading.setprofile(each_thread)
profiles[0].enable()
try:
    main(sys.argv[3:])
except KeyboardInterrupt:
    pass
finally:
    for one in profiles:
        one.disable()
    stats = pstats.Stats(profiles[0])
    for one in profiles[1:]:
        stats.add(one)
    stats.dump_stats(sys.argv[1])
"""


def burst(session: Path, count: int, body: Callable[[str], dict[str, object]], tag: str) -> float:
    staged = session.parents[1] / "staging"  # outside sessions/: the watcher sees only the renames in
    staged.mkdir(exist_ok=True)
    names = []
    for i in range(count):
        rid = f"{tag}-{i:06d}"
        (staged / f"{rid}.json").write_bytes(json.dumps(body(rid)).encode())
        names.append(rid)
    start = time.perf_counter()
    for rid in names:
        os.rename(staged / f"{rid}.json", session / "requests" / f"{rid}.json")
    for rid in names:
        response = session / "responses" / f"{rid}.json"
        while not response.exists():
            time.sleep(0.001)
    return time.perf_counter() - start


def thread_cpu(pid: int) -> tuple[float, float, float, float]:
    """CPU seconds of `pid`'s main (serving) thread, user and system, then of all its other threads."""
    tick = os.sysconf("SC_CLK_TCK")
    times = [0.0, 0.0, 0.0, 0.0]
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        at = 0 if int(task.name) == pid else 2
        times[at] += int(fields[11]) / tick
        times[at + 1] += int(fields[12]) / tick
    return times[0], times[1], times[2], times[3]


def cpu_per_ask(count: int) -> None:
    """Not profiled: the CPU each burst costs `serve` (history on), per ask, by thread."""
    with serving(["--history"]) as (session, proc):
        for label, body in (("no facts", base_request), ("facts", with_facts)):
            before = thread_cpu(proc.pid)
            seconds = burst(session, count, body, label.replace(" ", "-"))
            after = thread_cpu(proc.pid)
            mu, ms, ou, os_ = (1e6 * (a - b) / count for a, b in zip(after, before, strict=True))
            print(f"burst of {count}, {label}: {count / seconds:.0f}/s; CPU per ask (user+system): "
                  f"serving thread {mu:.0f}+{ms:.0f} µs, other threads {ou:.0f}+{os_:.0f} µs")


@contextmanager
def serving(
    extra: list[str], runner: list[str] | None = None
) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """`serve` on a fresh root with `bench.bench_race`'s rules (`git *` allowed); yields the session."""
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        root = tmp / "root"
        session = root / "sessions" / encode_session_id(SESSION)
        (session / "requests").mkdir(parents=True)
        (session / "responses").mkdir()
        config = tmp / "agent" / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"permission": {"bash": {"*": "ask", "git *": "allow"}}}))
        proc = subprocess.Popen(
            [*(runner or [sys.executable, "-m", "tui.cli"]), "serve", "--session", SESSION,
             "--forwarding-root", str(root), "--state-dir", str(tmp / "state"), "--on-ask", "deny",
             "--agent-dir", str(tmp / "agent"), "--project", str(tmp / "project"), *extra],
            cwd=REPO, stderr=subprocess.DEVNULL,
        )
        beat = root / "serving" / f"{encode_session_id(SESSION)}.json"
        while not beat.exists():
            if proc.poll() is not None:
                raise RuntimeError("serve did not start")
            time.sleep(0.01)
        try:
            yield session, proc
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)


def profile(count: int, top: int, keep: Path | None, threads: bool = False) -> None:
    """cProfile of the event loop's thread (`threads`: of every thread, summed) over two bursts."""
    with tempfile.TemporaryDirectory() as name:
        out = Path(name) / "serve.prof"
        runner = [sys.executable, "-c", _RUNNER, str(out), "--threads" if threads else "--loop"]
        with serving(["--history"], runner) as (session, _):
            plain = burst(session, count, base_request, "plain")
            facts = burst(session, count, with_facts, "facts")
        print(f"under cProfile: {count / plain:.0f}/s without facts, {count / facts:.0f}/s with facts")
        if keep is not None:
            keep.write_bytes(out.read_bytes())
        stats = pstats.Stats(str(out))
        stats.sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--cpu", type=int, default=0, metavar="N", help="CPU per ask over bursts of N")
    parser.add_argument("--keep", type=Path, help="also save the cProfile stats here")
    parser.add_argument("--threads", action="store_true", help="--profile every thread, not only the loop's")
    args = parser.parse_args()
    micro()
    if args.cpu:
        cpu_per_ask(args.cpu)
    if args.profile:
        profile(args.profile, args.top, args.keep, args.threads)


if __name__ == "__main__":
    main()
