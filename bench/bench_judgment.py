"""The judgment of one ask on the event loop (issue 37, third pass), checkouts compared in the same run.

Run: `uv run python -m bench.bench_judgment --checkout /work/main --checkout $PWD [--asks 10000]
[--rounds 7]`. Each round times `core.serving.judgment.judge_ask` in a fresh interpreter of each
checkout (rounds alternated) over `--asks` parsed requests, with the serve bench's config
(`bash`: `* ask`, `git * allow`): facts each naming another command (`yes`, a rule allows, every
judgment a miss), the same command each time (`same`, a hit) and no facts (`no`, asked: the fail-safe
denies). Prints the best round's CPU µs per ask (`time.process_time`) and the Python calls per ask
(a `sys.setprofile` count of one pass), min over the rounds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

#: Runs inside the checkout: only names both sides have (`judge_ask`, `RecordedAuthority`, `PolicyStore`).
_ROUND = r"""
import json, sys, tempfile, time
from pathlib import Path
from bench.bench_race import with_facts, with_same_facts
from bench.roundtrip import base_request
from core.clock import SYSTEM_CLOCK
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.judgment import judge_ask
from core.wire.reader import parse_request

asks = int(sys.argv[1])
bodies = {"yes": with_facts, "same": with_same_facts, "no": base_request}
out = {}
with tempfile.TemporaryDirectory() as tmp:
    agent = Path(tmp) / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"*": "ask", "git *": "allow"}}}))
    for kind, body in bodies.items():
        judge = RecordedAuthority(PolicyStore(agent, Path(tmp) / "project", None))
        parsed = [parse_request(json.dumps(body(f"bench-{i:06d}")).encode()) for i in range(asks)]
        judge_ask(judge, parsed[0], "bench-session", SYSTEM_CLOCK)  # the policy composed once
        start = time.process_time()
        for one in parsed:
            judge_ask(judge, one, "bench-session", SYSTEM_CLOCK)
        cpu = (time.process_time() - start) / asks * 1e6
        fresh = [parse_request(json.dumps(body(f"count-{i:06d}")).encode()) for i in range(1000)]
        calls = [0]
        def count(frame, event, arg):
            if event in ("call", "c_call"):
                calls[0] += 1
        sys.setprofile(count)
        for one in fresh:
            judge_ask(judge, one, "bench-session", SYSTEM_CLOCK)
        sys.setprofile(None)
        out[kind] = (cpu, calls[0] / len(fresh))
print(json.dumps(out))
"""


def one_round(checkout: Path, asks: int) -> dict[str, tuple[float, float]]:
    done = subprocess.run([sys.executable, "-c", _ROUND, str(asks)], cwd=checkout, check=True,
                          capture_output=True, text=True)
    return {kind: (cpu, calls) for kind, (cpu, calls) in json.loads(done.stdout).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", type=Path, required=True)
    parser.add_argument("--asks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    best: dict[Path, dict[str, tuple[float, float]]] = {c: {} for c in args.checkout}
    for _ in range(args.rounds):
        for checkout in args.checkout:
            for kind, (cpu, calls) in one_round(checkout, args.asks).items():
                old = best[checkout].get(kind, (float("inf"), float("inf")))
                best[checkout][kind] = (min(old[0], cpu), min(old[1], calls))
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"judge_ask, {args.asks} asks, best of {args.rounds} rounds; load average {' '.join(load)}")
    print(f"{'checkout':30s} {'facts':6s} {'CPU µs/ask':>11s} {'calls/ask':>10s}")
    for checkout, kinds in best.items():
        for kind, (cpu, calls) in kinds.items():
            print(f"{checkout!s:30s} {kind:6s} {cpu:11.2f} {calls:10.1f}")


if __name__ == "__main__":
    main()
