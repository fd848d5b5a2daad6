"""The queue at scale: the real app, headless, with thousands of real pending asks.

Run: `uv run python -m bench.bench_queue [--pending 1000,5000] [--idle 10] [--profile | --cprofile]`.

The app as `pi-authorizer app` builds it (recorded authority over the demo pi config, the history
ledger, inotify) serves a temporary forwarding root; N request files no rule decides (children
waiting) are written beforehand and renamed into the inbox at once. Frames are caught as in
`bench.bench_tui` (each compositor update rendered to the bytes a terminal would get and searched
for a marker). For each N:

- intake: from the first rename to the frame that shows `Ask 1/N` (every ask in the table), and the
  process's CPU meanwhile (the wall time follows the load; the CPU much less);
- filter: `/`, then the 6 characters of `job-00` typed one by one, each timed from the key event to
  the first frame whose table title names that filter (the next key is sent once it is painted);
  settled: the sum. `job-00` keeps 1,000 of 5,000 asks (every ask matches the first 5 characters);
- clear: `esc` to the first frame with the unfiltered title;
- `j`: 200 presses, 20 ms apart, each to the first frame showing the new `Ask n/N`;
- idle: the process's CPU (every thread: the app and the core) over `--idle` seconds with no key
  pressed, its toasts dismissed, and each thread's share (`/proc/self/task`: the main thread runs
  the app and the core's event loop; the core's threads are its own); and the RSS before the asks
  came and after.

The load average is printed at the start and the end of each N: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import resource
import shlex
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from textual import events

from bench.bench_tui import FrameApp, frame_app, painted, stage, until
from bench.profile_serve import report

FILTER = "job-00"
PRESSES = 200
PRESS_GAP_S = 0.02
SIZE = (120, 40)
PROFILE: list[str | None] = [None]  # `--profile`: the py-spy command sampling `j` and idle
CPROFILE: list[bool] = [False]  # `--cprofile`: the main thread's Python calls per stage


@contextmanager
def spying(what: str) -> Iterator[None]:
    """With `--profile`: py-spy samples this process meanwhile; its hottest frames are printed."""
    if CPROFILE[0]:
        with cprofiling(what):
            yield
        return
    if PROFILE[0] is None:
        yield
        return
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        command = [*shlex.split(PROFILE[0]), "record", "--pid", str(os.getpid()), "--threads",
                   "--nonblocking", "--rate", "250", "--format", "raw", "--output", out.name]
        spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached
        try:
            yield
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
            print(f"  profile of {what}:")
            report(Path(out.name).read_text(), 15)


@contextmanager
def cprofiling(what: str) -> Iterator[None]:
    """With `--cprofile`: the main thread's (the app's) calls meanwhile, the costliest printed."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        profile.dump_stats(Path(tempfile.gettempdir()) / f"bench-queue-{what.split()[-1]}.prof")
        print(f"  cProfile of {what} (main thread, saved in {tempfile.gettempdir()}):")
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def thread_ticks() -> dict[str, int]:
    """CPU ticks (user + system) of each live thread of this process, by thread name."""
    ticks: dict[str, int] = {}
    for thread in threading.enumerate():
        try:
            fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = "app's main thread" if thread is threading.main_thread() else thread.name.split(" ")[0]
        ticks[name] = ticks.get(name, 0) + int(fields[11]) + int(fields[12])
    return ticks


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


GC_MS: list[float] = [0.0, 0.0]  # the garbage collector's time (ms): every generation, the oldest alone
_gc_start: list[float] = [0.0]


def _gc_timer(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_start[0] = time.perf_counter()
        return
    spent = (time.perf_counter() - _gc_start[0]) * 1000
    GC_MS[0] += spent
    if info.get("generation") == 2:
        GC_MS[1] += spent


def gc_spent() -> tuple[float, float]:
    """(every generation, the oldest) ms of garbage collection since the last call."""
    spent = (GC_MS[0], GC_MS[1])
    GC_MS[0] = GC_MS[1] = 0.0
    return spent


CPU_MS: list[float] = []  # each key's CPU (the whole process, ms): less of the load than its wall time


async def key(app: FrameApp, name: str, character: str | None, marker: str, within: float = 300.0) -> float:
    """Post one key event; seconds until the first frame containing `marker` (its CPU: `CPU_MS`)."""
    app.expect(marker)
    cpu, start = time.process_time(), time.perf_counter()
    app.post_message(events.Key(name, character))
    elapsed = await painted(app, within) - start
    CPU_MS.append((time.process_time() - cpu) * 1000)
    return elapsed


async def run(workdir: Path, pending: int, idle_s: float) -> dict[str, object]:
    if _gc_timer not in gc.callbacks:
        gc.callbacks.append(_gc_timer)
    app, folder = frame_app(workdir)
    out: dict[str, object] = {"pending": pending, "load_start": load()}
    async with app.run_test(size=SIZE):
        await until(lambda: app.queue.is_current)
        rss_before = rss_mb()
        staged = [stage(folder, i, f"npm run job-{i:05d}") for i in range(pending)]
        app.expect(f"Ask 1/{pending}")
        with spying("the intake"):
            cpu, start = time.process_time(), time.perf_counter()
            for temp, final in staged:
                os.replace(temp, final)
            out["intake_s"] = await painted(app, 600.0) - start
            out["intake_cpu_s"] = time.process_time() - cpu
        out["intake_gc"] = gc_spent()
        await until(lambda: app.queue.table.row_count == pending, 60.0)
        app.clear_notifications()
        await asyncio.sleep(1.0)

        await key(app, "slash", "/", "filter: agent:NAME")  # the field's placeholder
        strokes = []
        with spying("the filter's keystrokes"):
            for n in range(1, len(FILTER) + 1):
                strokes.append(await key(app, FILTER[n - 1] if FILTER[n - 1] != "-" else "minus",
                                         FILTER[n - 1], f"filter: {FILTER[:n]} ("))
        out["keys_gc"] = gc_spent()
        out["keystrokes_ms"] = [round(s * 1000, 1) for s in strokes]
        out["keystrokes_cpu_ms"] = [round(c, 1) for c in CPU_MS[-len(strokes):]]
        out["filter_s"] = sum(strokes)
        out["shown"] = app.queue.table.row_count
        with spying("the clearing"):
            out["clear_s"] = await key(app, "escape", None, "Pending asks — oldest first")
        out["clear_cpu_ms"] = CPU_MS[-1]
        await asyncio.sleep(0.5)

        presses = []
        first = app.queue.table.ask_keys.index(app.queue.selected) + 1 if app.queue.selected else 1
        with spying("the j presses"):
            for n in range(first + 1, min(pending, first + PRESSES) + 1):
                presses.append(await key(app, "j", "j", f"Ask {n}/{pending}", 30.0))
                await asyncio.sleep(PRESS_GAP_S)
        out["j_p50_ms"] = statistics.median(presses) * 1000
        out["j_cpu_p50_ms"] = statistics.median(CPU_MS[-len(presses):])
        out["j_p95_ms"] = statistics.quantiles(presses, n=100, method="inclusive")[94] * 1000

        app.clear_notifications()
        await asyncio.sleep(1.0)
        with spying("idle"):
            cpu, wall = time.process_time(), time.perf_counter()
            gc_spent()
            before = thread_ticks()
            await asyncio.sleep(idle_s)
            out["idle_gc"] = gc_spent()
            hz = os.sysconf("SC_CLK_TCK")
            out["idle_threads"] = {name: (ticks - before.get(name, 0)) / hz / idle_s * 100
                                   for name, ticks in thread_ticks().items() if ticks > before.get(name, 0)}
            out["idle_cpu_pct"] = (time.process_time() - cpu) / (time.perf_counter() - wall) * 100
        out["rss_mb"] = f"{rss_before:.0f} -> {rss_mb():.0f}"
        out["load_end"] = load()
        await app.quitting.stop_serving()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pending", default="1000,5000", help="pending asks per run, comma-separated")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measured")
    parser.add_argument("--profile", nargs="?", const="uvx py-spy", default=None, metavar="PY_SPY",
                        help="sample the j presses and the idle time with py-spy (default `uvx py-spy`)")
    parser.add_argument("--cprofile", action="store_true",
                        help="cProfile the main thread (the app) per stage instead; slows it down")
    args = parser.parse_args()
    PROFILE[0] = args.profile
    CPROFILE[0] = args.cprofile
    for pending in (int(n) for n in args.pending.split(",") if n):
        with tempfile.TemporaryDirectory(prefix="pi-authorizer-bench-queue-") as tmp:
            r = asyncio.run(run(Path(tmp), pending, args.idle))
        print(f"{pending:,} pending (load {r['load_start']} -> {r['load_end']}):")
        print(f"  all shown after {r['intake_s']:.2f} s, CPU {r['intake_cpu_s']:.2f} s"
              " (the whole process: serving and the app; target < 5 s with 5,000)")
        print("  garbage collection (ms, all generations / the oldest): intake {}, keys {}, idle {}".format(
            *("{:.0f} / {:.0f}".format(*cast("tuple[float, float]", r[k]))
              for k in ("intake_gc", "keys_gc", "idle_gc"))))
        print(f"  filter {FILTER!r}: settled after {r['filter_s']:.2f} s, {r['shown']} shown;"
              f" per key {r['keystrokes_ms']} ms, CPU {r['keystrokes_cpu_ms']} ms"
              " (targets < 3 s, each < 100 ms)")
        print(f"  cleared after {r['clear_s']:.2f} s, CPU {r['clear_cpu_ms']:.0f} ms (target < 2 s)")
        print(f"  j -> repaint: p50 {r['j_p50_ms']:.1f} ms, p95 {r['j_p95_ms']:.1f} ms,"
              f" CPU p50 {r['j_cpu_p50_ms']:.1f} ms"
              " (targets p50 < 100 ms with 5,000; p95 < 50 ms with 1,000)")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  idle: {r['idle_cpu_pct']:.1f}% CPU over {args.idle:.0f} s (target < 3%);"
              f" RSS {r['rss_mb']} MB; peak {peak:.0f} MB")
        threads = cast("dict[str, float]", r["idle_threads"])
        print("  idle CPU by thread: " + ", ".join(f"{n} {p:.1f}%" for n, p in sorted(threads.items())))


if __name__ == "__main__":
    main()
