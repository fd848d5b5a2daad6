"""Race the reference `ForwardedRequestServer` (20.7.3) and pi-authorizer `serve` on the same probes.

Run: `uv run python -m bench.bench_race [--sequential N] [--bursts 1000,10000]`.

Both servers run as real processes, one after the other, in this one invocation: the reference
through `tests/interop/node/reference_server.ts` (the package's own class, polled every 250 ms like
its ForwardingManager, an instant policy, no fsync, no history), pi-authorizer as `serve`. A
child-side writer plays the children: it writes each request to a staging folder and renames it into
the inbox, then waits for the response file (deleting it once seen, as a child does).

Probes: sequential asks (rename → response exists, p50/p99) and bursts of N requests renamed in at
once (requests/s from the first rename to the last response), each without facts (pi-authorizer:
fail-safe deny) and with facts (a rule allows), pi-authorizer with and without history. Ratios are
printed as "x times the reference" (latency: reference/ours; throughput: ours/reference).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.roundtrip import REPO, SESSION, base_request, start_serve
from core.paths import encode_session_id

NODE_DIR = REPO / "tests" / "interop" / "node"
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


@dataclass(frozen=True)
class Server:
    """How to start one contender on a fresh root; `label` names it in the table."""

    label: str
    reference: bool
    history: bool = False


REFERENCE = Server("reference", reference=True)


@contextmanager
def running(server: Server, tmp: Path) -> Iterator[Path]:
    """Start `server` on a fresh forwarding root under `tmp`; yields the session folder."""
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
    else:
        agent = tmp / "agent"
        config = agent / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"permission": {"bash": {"*": "ask", "git *": "allow"}}}))
        extra = ["--on-ask", "deny", "--agent-dir", str(agent), "--project", str(tmp / "project")]
        extra.append("--history" if server.history else "--no-history")
        proc = start_serve(root, tmp / "state", extra)
    try:
        yield session
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


class Writer:
    """The children's side: stage a request, rename it into `requests/`, wait for its response."""

    def __init__(self, session: Path, body: Body) -> None:
        self.session = session
        self.body = body
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
        for _ in range(count):
            rid, temp = self.stage()
            response = self.session / "responses" / f"{rid}.json"
            start = time.perf_counter()
            self.publish(rid, temp)
            while not os.path.exists(response):
                time.sleep(0.0001)
            samples.append((time.perf_counter() - start) * 1000)
            response.unlink()
            time.sleep(0.01)  # a child's next ask comes a moment later, not on the same tick
        return samples

    def burst(self, count: int) -> float:
        """Requests per second: `count` renamed in at once, until the last response exists."""
        staged = [self.stage() for _ in range(count)]
        responses = self.session / "responses"
        responses.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        for rid, temp in staged:
            self.publish(rid, temp)
        deadline = start + 600
        while sum(1 for n in os.listdir(responses) if n.endswith(".json")) < count:
            if time.perf_counter() > deadline:
                raise RuntimeError("burst not answered within 10 minutes")
            time.sleep(0.002)
        elapsed = time.perf_counter() - start
        for name in os.listdir(responses):
            if name.endswith(".json"):
                (responses / name).unlink(missing_ok=True)
        return count / elapsed


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@contextmanager
def probing(server: Server, body: Body) -> Iterator[Writer]:
    with tempfile.TemporaryDirectory() as tmp, running(server, Path(tmp)) as session:
        yield Writer(session, body)


def sequential(server: Server, body: Body, count: int) -> tuple[float, float]:
    """(p50, p99) in milliseconds."""
    with probing(server, body) as writer:
        samples = writer.sequential(count)
    return statistics.median(samples), percentile(samples, 0.99)


def burst(server: Server, body: Body, size: int) -> float:
    with probing(server, body) as writer:
        return writer.burst(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sequential", type=int, default=40, help="sequential asks per contender")
    parser.add_argument("--bursts", default="1000,10000", help="burst sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="bursts per figure (the median is printed)")
    args = parser.parse_args()
    bursts = [int(n) for n in args.bursts.split(",") if n]
    ours = [Server("serve --no-history", reference=False), Server("serve (history)", False, history=True)]
    bodies: list[tuple[str, Body]] = [("no facts", base_request), ("facts, rule allow", with_facts)]

    if args.sequential:
        print(f"sequential asks, rename -> response exists (n={args.sequential} each)")
    for kind, body in bodies if args.sequential else []:
        ref_p50, ref_p99 = sequential(REFERENCE, body, args.sequential)
        print(f"  [{kind}] reference: p50 {ref_p50:.1f} ms, p99 {ref_p99:.1f} ms")
        for server in ours:
            p50, p99 = sequential(server, body, args.sequential)
            print(
                f"  [{kind}] {server.label}: p50 {p50:.2f} ms, p99 {p99:.2f} ms"
                f"  -> p50 {ref_p50 / p50:.0f}x, p99 {ref_p99 / p99:.0f}x faster"
            )
    for size in bursts:
        print(f"burst of {size:,} renamed in at once, requests/s (median of {args.repeat} rounds)")
        for kind, body in bodies:
            # Rounds alternate reference and ours, so each ratio pairs runs made moments apart.
            rates: dict[str, list[float]] = {s.label: [] for s in (REFERENCE, *ours)}
            ratios: dict[str, list[float]] = {s.label: [] for s in ours}
            for _ in range(args.repeat):
                ref_rate = burst(REFERENCE, body, size)
                rates[REFERENCE.label].append(ref_rate)
                for server in ours:
                    rate = burst(server, body, size)
                    rates[server.label].append(rate)
                    ratios[server.label].append(rate / ref_rate)
            print(f"  [{kind}] reference: {statistics.median(rates[REFERENCE.label]):,.0f}/s"
                  f"  rounds {_figures(rates[REFERENCE.label])}")
            for server in ours:
                rate, ratio = statistics.median(rates[server.label]), statistics.median(ratios[server.label])
                print(f"  [{kind}] {server.label}: {rate:,.0f}/s  -> {ratio:.2f}x the reference"
                      f"  rounds {_figures(rates[server.label])}, paired ratios"
                      f" {', '.join(f'{r:.2f}' for r in ratios[server.label])}")


def _figures(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)


if __name__ == "__main__":
    main()
