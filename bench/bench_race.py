"""Race the reference `ForwardedRequestServer` (20.7.3) and pi-authorizer `serve` on the same probes.

Run: `uv run python -m bench.bench_race [--sequential N] [--bursts 1000,10000] [--dir /dev/shm]
[--fresh-ext4 MIB]`.

Both servers run as real processes, one after the other, in this one invocation: the reference
through `tests/interop/node/reference_server.ts` (the package's own class, polled every 250 ms like
its ForwardingManager, an instant policy, no fsync, no history), pi-authorizer as `serve`. A
child-side writer plays the children: it writes each request to a staging folder and renames it into
the inbox, then waits for the response file (deleting it once seen, as a child does).

Probes: sequential asks (rename → response exists, p50/p99) and bursts of N requests renamed in at
once (requests/s from the first rename to the last response), each without facts (pi-authorizer:
fail-safe deny) and with facts (a rule allows), pi-authorizer with and without history. Ratios are
printed as "x times the reference" (latency: reference/ours; throughput: ours/reference).

The writer waits for responses the same way for every contender: by default on inotify events of
`responses/` (`ResponseWatch`: it sleeps in the kernel and costs a few µs per response seen);
`--waiter listdir` is the earlier instrument, a listing of `responses/` every 2 ms in a burst and an
`exists()` every 0.1 ms for a sequential ask, which on 2 cores takes CPU both servers then lack.
`--checkout DIR` (repeatable) races pi-authorizer as run from those checkouts instead of this one
(e.g. a worktree of `main` and one of the change), in the same rounds, so a change is measured
paired against the code before it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.roundtrip import REPO, SESSION, base_request, start_serve
from core.disk.paths import encode_session_id
from core.forwarding.inotify import IN_CREATE, IN_IGNORED, IN_MOVED_TO, IN_ONLYDIR, IN_Q_OVERFLOW, Inotify

NODE_DIR = REPO / "tests" / "interop" / "node"
WHERE: list[str | None] = [None]  # where each contender's root is made (`--dir`; default TMPDIR)
Body = Callable[[str], dict[str, object]]


def with_facts(rid: str) -> dict[str, object]:
    request = base_request(rid)
    request["value"] = f"git status {rid}"
    request["accessIntent"] = {
        "surface": "bash",
        "matchValues": [f"git status {rid}"],
        "boundaryValue": None,
        "requesterCwd": "/w",
        "principal": {"sessionId": "child", "agentName": "Explore"},
    }
    return request


def with_same_facts(rid: str) -> dict[str, object]:
    """`with_facts`, every ask the same command (the facts cache's case: one agent repeating itself)."""
    request = with_facts(rid)
    request["value"] = "git status"
    request["accessIntent"]["matchValues"] = ["git status"]  # type: ignore[index]
    return request


@dataclass(frozen=True)
class Server:
    """How to start one contender on a fresh root; `label` names it in the table."""

    label: str
    reference: bool
    history: bool = False
    repo: Path = REPO
    floor: bool = False


REFERENCE = Server("reference", reference=True)
FLOOR = Server("floor", reference=False, floor=True)


def group_cpu_s(pgid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of every live process of the process group `pgid` (a contender and
    any process it started: `tsx` runs the reference in a child `node`), from `/proc`."""
    user = system = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the command: state, ppid, pgrp, ..., utime, stime
            user += int(fields[11])
            system += int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


@contextmanager
def running(server: Server, tmp: Path) -> Iterator[tuple[Path, int]]:
    """Start `server` on a fresh forwarding root under `tmp`; yields the session folder and the
    contender's process group."""
    root = tmp / "root"
    session = root / "sessions" / encode_session_id(SESSION)
    (session / "requests").mkdir(parents=True)
    (session / "responses").mkdir()
    if server.reference:
        proc = subprocess.Popen(
            ["node", "node_modules/tsx/dist/cli.mjs", "reference_server.ts", str(root), SESSION, "allow"],
            cwd=NODE_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            proc.kill()
            raise RuntimeError("the reference server did not start")
    elif server.floor:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.floor_server", str(root), SESSION, str(tmp / "state")],
            cwd=REPO, stdout=subprocess.PIPE, start_new_session=True,
        )
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            proc.kill()
            raise RuntimeError("the floor server did not start")
    else:
        agent = tmp / "agent"
        config = agent / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"permission": {"bash": {"*": "ask", "git *": "allow"}}}))
        extra = ["--on-ask", "deny", "--agent-dir", str(agent), "--project", str(tmp / "project")]
        extra.append("--history" if server.history else "--no-history")
        proc = start_serve(root, tmp / "state", extra, repo=server.repo)
    try:
        yield session, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


@dataclass(frozen=True)
class Burst:
    """One burst: requests/s from the first rename to the last response seen; how long the renames
    took; when the first response was placed and the longest pause between two responses placed
    (from the files' change times, which a rename sets: a poll shows as a pause); the CPU the
    writer itself spent waiting (CPU both contenders lack on 2 cores), all in ms; and the contender's
    CPU per ask over the burst (its processes' user + system time, 10 ms ticks), in µs, and of it
    the user time."""

    rate: float
    renames_ms: float
    first_ms: float
    pause_ms: float
    waiter_cpu_ms: float
    server_cpu_us: float
    server_user_us: float = 0.0


class ResponseWatch:
    """Which of the awaited response files appeared, from inotify events on `responses/` (a response
    is renamed or linked into place: `IN_MOVED_TO` or `IN_CREATE`); the writer sleeps in the kernel
    meanwhile. The reference removes an empty `responses/` and makes it again: the watch is then
    renewed (checked every millisecond while the folder is missing). On a queue overflow, a renewed
    watch or a quiet second, `responses/` is listed once instead."""

    def __init__(self, responses: Path) -> None:
        self.responses = responses
        self.ino = Inotify()
        self.watching = False
        self._arm()

    def _arm(self) -> None:
        mask = IN_MOVED_TO | IN_CREATE | IN_ONLYDIR
        self.watching = self.ino.add_watch(str(self.responses), mask) is not None

    def wait(self, names: set[str], deadline: float) -> None:
        """Until every name in `names` exists (they are removed from it)."""
        while names:
            ready, _, _ = select.select([self.ino.fd], [], [], 1.0 if self.watching else 0.001)
            events = self.ino.read_events() if ready else []
            lost = any(event.mask & (IN_Q_OVERFLOW | IN_IGNORED) for event in events)
            if lost or not self.watching:
                self._arm()
            if not events or lost:
                found = names.intersection(_listing(self.responses))
            else:
                found = {event.name for event in events}
            names.difference_update(found)
            if time.perf_counter() > deadline:
                raise RuntimeError("responses not written within 10 minutes")

    def close(self) -> None:
        self.ino.close()


def _listing(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


class Writer:
    """The children's side: stage a request, rename it into `requests/`, wait for its response."""

    def __init__(self, session: Path, body: Body, waiter: str, server: int = 0) -> None:
        self.session = session
        self.server = server
        self.body = body
        self.waiter = waiter
        self.staging = session.parents[1] / "staging"
        self.staging.mkdir(exist_ok=True)
        self.serial = 0

    def stage(self) -> tuple[str, Path]:
        self.serial += 1
        rid = f"race-{self.serial:07d}"
        temp = self.staging / f"{rid}.json"
        temp.write_bytes(json.dumps(self.body(rid)).encode())
        return rid, temp

    def publish(self, rid: str, temp: Path) -> None:
        """The child's rename; the reference removes an empty `requests/`, so make it again if gone."""
        target = self.session / "requests" / f"{rid}.json"
        try:
            os.rename(temp, target)
        except FileNotFoundError:
            (self.session / "requests").mkdir(parents=True, exist_ok=True)
            os.rename(temp, target)

    def sequential(self, count: int) -> list[float]:
        samples: list[float] = []
        watch = ResponseWatch(self.session / "responses") if self.waiter == "inotify" else None
        for _ in range(count):
            rid, temp = self.stage()
            response = self.session / "responses" / f"{rid}.json"
            start = time.perf_counter()
            self.publish(rid, temp)
            if watch is not None:
                watch.wait({response.name}, start + 600)
            else:
                while not os.path.exists(response):
                    time.sleep(0.0001)
            samples.append((time.perf_counter() - start) * 1000)
            response.unlink()
            time.sleep(0.01)  # a child's next ask comes a moment later, not on the same tick
        if watch is not None:
            watch.close()
        return samples

    def burst(self, count: int) -> Burst:
        """`count` renamed in at once, until the last response exists."""
        staged = [self.stage() for _ in range(count)]
        responses = self.session / "responses"
        responses.mkdir(parents=True, exist_ok=True)
        watch = ResponseWatch(responses) if self.waiter == "inotify" else None
        user, system = group_cpu_s(self.server) if self.server else (0.0, 0.0)
        wall = time.time_ns()
        start = time.perf_counter()
        for rid, temp in staged:
            self.publish(rid, temp)
        renamed, cpu = time.perf_counter(), time.process_time()
        deadline = start + 600
        if watch is not None:
            watch.wait({f"{rid}.json" for rid, _ in staged}, deadline)
            watch.close()
        else:
            while sum(1 for n in os.listdir(responses) if n.endswith(".json")) < count:
                if time.perf_counter() > deadline:
                    raise RuntimeError("burst not answered within 10 minutes")
                time.sleep(0.002)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        user_after, system_after = group_cpu_s(self.server) if self.server else (0.0, 0.0)
        user, server_cpu = user_after - user, user_after + system_after - user - system
        placed = sorted(os.stat(responses / f"{rid}.json").st_ctime_ns for rid, _ in staged)
        pause = max((b - a for a, b in itertools.pairwise(placed)), default=0)
        for name in os.listdir(responses):
            if name.endswith(".json"):
                (responses / name).unlink(missing_ok=True)
        return Burst(count / elapsed, (renamed - start) * 1000, (placed[0] - wall) / 1e6, pause / 1e6,
                     cpu * 1000, server_cpu / count * 1e6, user / count * 1e6)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@contextmanager
def probing(server: Server, body: Body, waiter: str) -> Iterator[Writer]:
    with _root_dir() as tmp, running(server, Path(tmp)) as (session, pgid):
        yield Writer(session, body, waiter, pgid)


#: `--fresh-ext4 MIB`: every probe's root on an ext4 made for it (0: the folder given by `--dir`).
FRESH_MIB = [0]
#: Set in the re-executed process that runs inside its own mount namespace.
IN_NAMESPACE = "PI_AUTHORIZER_BENCH_NAMESPACE"


@contextmanager
def _root_dir() -> Iterator[str]:
    """Where one probe's root is made: a temporary folder, or a freshly made ext4 (an image file
    formatted and loop-mounted for this probe alone, in this process's private mount namespace), so
    no contender runs on the inodes another one's deletions left behind."""
    if not FRESH_MIB[0]:
        with tempfile.TemporaryDirectory(dir=WHERE[0]) as tmp:
            yield tmp
        return
    with tempfile.TemporaryDirectory(dir=WHERE[0]) as work:
        image, mount = Path(work) / "fs.img", Path(work) / "fs"
        mount.mkdir()
        with image.open("wb") as out:
            out.truncate(FRESH_MIB[0] << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
        try:
            yield str(mount)
        finally:
            subprocess.run(["umount", str(mount)], check=True)


def _in_namespace() -> None:
    """Run this very command again inside a private mount namespace (as root), once."""
    if os.environ.get(IN_NAMESPACE):
        return
    command = ["unshare", "-m", "--propagation", "private", sys.executable, "-m", "bench.bench_race",
               *sys.argv[1:]]
    sys.stdout.flush()
    os.execvpe("unshare", command, {**os.environ, IN_NAMESPACE: "1"})  # noqa: S606 (a fixed argv)


def sequential(server: Server, body: Body, count: int, waiter: str) -> tuple[float, float]:
    """(p50, p99) in milliseconds."""
    with probing(server, body, waiter) as writer:
        samples = writer.sequential(count)
    return statistics.median(samples), percentile(samples, 0.99)


def burst(server: Server, body: Body, size: int, waiter: str) -> Burst:
    with probing(server, body, waiter) as writer:
        return writer.burst(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sequential", type=int, default=40, help="sequential asks per contender")
    parser.add_argument("--bursts", default="1000,10000", help="burst sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="bursts per figure (the median is printed)")
    parser.add_argument("--waiter", choices=("inotify", "listdir"), default="inotify",
                        help="how the writer waits for responses (the same for every contender)")
    parser.add_argument("--ours", default="no-history,history",
                        help="pi-authorizer contenders, comma-separated: no-history, history")
    parser.add_argument("--checkout", type=Path, action="append", default=[], metavar="DIR",
                        help="run the --ours contenders from this checkout (repeatable; default: this one)")
    parser.add_argument("--facts", default="no,yes",
                        help="probes: no (fail-safe), yes (rule allow), same (rule allow, one command)")
    parser.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                        help="race the floor server (`bench.floor_server`) in the same rounds")
    parser.add_argument("--dir", default=None, help="where the roots are made (e.g. /dev/shm: tmpfs)")
    parser.add_argument("--fresh-ext4", type=int, default=0, metavar="MIB",
                        help="each probe on an ext4 of this size made for it (loop-mounted under --dir,"
                             " in a private mount namespace: needs root and unshare(1))")
    args = parser.parse_args()
    WHERE[0], FRESH_MIB[0] = args.dir, args.fresh_ext4
    if args.fresh_ext4:
        _in_namespace()
    where = f"a fresh ext4 of {args.fresh_ext4} MiB each, under " if args.fresh_ext4 else ""
    print(f"load average at start: {_load()}; roots in {where}{args.dir or tempfile.gettempdir()}")
    bursts = [int(n) for n in args.bursts.split(",") if n]
    kinds = {"no-history": ("serve --no-history", False), "history": ("serve (history)", True)}
    ours: list[Server] = []
    for repo in args.checkout or [REPO]:
        suffix = f" @{repo.resolve().name}" if args.checkout else ""
        for kind in args.ours.split(","):
            label, history = kinds[kind]
            ours.append(Server(label + suffix, False, history=history, repo=repo.resolve()))
    every: dict[str, tuple[str, Body]] = {
        "no": ("no facts", base_request), "yes": ("facts, rule allow", with_facts),
        "same": ("facts, one command", with_same_facts)}
    bodies = [every[f] for f in args.facts.split(",")]
    waiter = args.waiter

    if args.sequential:
        print(f"sequential asks, rename -> response exists (n={args.sequential} each, waiter {waiter})")
    for kind, body in bodies if args.sequential else []:
        ref_p50, ref_p99 = sequential(REFERENCE, body, args.sequential, waiter)
        print(f"  [{kind}] reference: p50 {ref_p50:.1f} ms, p99 {ref_p99:.1f} ms")
        for server in ours:
            p50, p99 = sequential(server, body, args.sequential, waiter)
            print(
                f"  [{kind}] {server.label}: p50 {p50:.2f} ms, p99 {p99:.2f} ms"
                f"  -> p50 {ref_p50 / p50:.0f}x, p99 {ref_p99 / p99:.0f}x faster"
            )
    others = [FLOOR, *ours] if args.floor else ours
    for size in bursts:
        print(f"burst of {size:,} renamed in at once, requests/s (median of {args.repeat} rounds,"
              f" waiter {waiter}; per round: rate (renames, first response, longest pause, the"
              f" waiter's CPU; in ms; the contender's CPU per ask, user + system µs))")
        for kind, body in bodies:
            # Rounds alternate the contenders (each round starts one later), so each ratio pairs
            # runs made moments apart and none always follows the same one's deletions.
            contenders = [REFERENCE, *others]
            runs: dict[str, list[Burst]] = {s.label: [] for s in contenders}
            for round_no in range(args.repeat):
                turn = round_no % len(contenders)
                for server in contenders[turn:] + contenders[:turn]:
                    runs[server.label].append(burst(server, body, size, waiter))
                print(f"    round {round_no + 1} done, load {_load()}", flush=True)
            refs = runs[REFERENCE.label]
            floors = runs[FLOOR.label] if args.floor else None
            for server in contenders:
                mine = runs[server.label]
                rate = statistics.median(r.rate for r in mine)
                line = f"  [{kind}] {server.label}: {rate:,.0f}/s"
                if server is not REFERENCE:
                    ratios = [m.rate / r.rate for m, r in zip(mine, refs, strict=True)]
                    line += (f" -> {statistics.median(ratios):.2f}x the reference (paired"
                             f" {', '.join(f'{r:.2f}' for r in ratios)})")
                line += f"; CPU per ask {_cpu(mine)}"
                if floors is not None and server is not FLOOR:
                    cpu = [m.server_cpu_us / f.server_cpu_us for m, f in zip(mine, floors, strict=True)
                           if f.server_cpu_us]
                    line += f", {statistics.median(cpu):.2f}x the floor's" if cpu else ""
                print(line)
                print(f"      rounds {_figures(mine)}")
    print(f"load average at end: {_load()}")


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _cpu(runs: list[Burst]) -> str:
    """The median round's CPU per ask, split: `total (user / system) µs`, and the range."""
    mid = sorted(runs, key=lambda r: r.server_cpu_us)[len(runs) // 2]
    low, high = min(r.server_cpu_us for r in runs), max(r.server_cpu_us for r in runs)
    return (f"{mid.server_cpu_us:.0f} µs ({mid.server_user_us:.0f} user / "
            f"{mid.server_cpu_us - mid.server_user_us:.0f} system; rounds {low:.0f}–{high:.0f})")


def _figures(runs: list[Burst]) -> str:
    return ", ".join(
        f"{r.rate:,.0f} ({r.renames_ms:.0f}, {r.first_ms:.0f}, {r.pause_ms:.0f}, {r.waiter_cpu_ms:.0f};"
        f" {r.server_user_us:.0f} + {r.server_cpu_us - r.server_user_us:.0f} µs)"
        for r in runs)


if __name__ == "__main__":
    main()
