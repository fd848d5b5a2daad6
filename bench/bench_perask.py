"""Per-ask interpreter cost on the serving thread (issue 11, bursts of 10,000).

Run: `uv run python -m bench.bench_perask [--profile N]`.

Micro: µs per call (best of 5 rounds) for reading a realistic request body (with and without facts),
building and encoding the response, and the served log line's untrusted parts. `--profile N`:
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
from collections.abc import Callable
from pathlib import Path

from bench.bench_race import with_facts
from bench.roundtrip import REPO, SESSION, base_request
from core.logline import log_safe
from core.paths import encode_session_id
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
import cProfile, sys
from tui.cli import main
profile = cProfile.Profile()
profile.enable()
try:
    main(sys.argv[2:])
except KeyboardInterrupt:
    pass
finally:
    profile.disable()
    profile.dump_stats(sys.argv[1])
"""


def burst(session: Path, count: int, body: Callable[[str], dict[str, object]], tag: str) -> float:
    staged = session.parent / "staging"
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


def profile(count: int, top: int, keep: Path | None) -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        root = tmp / "root"
        session = root / "sessions" / encode_session_id(SESSION)
        (session / "requests").mkdir(parents=True)
        (session / "responses").mkdir()
        config = tmp / "agent" / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"permission": {"bash": {"*": "ask", "git *": "allow"}}}))
        out = tmp / "serve.prof"
        proc = subprocess.Popen(
            [sys.executable, "-c", _RUNNER, str(out), "serve", "--session", SESSION, "--forwarding-root",
             str(root), "--state-dir", str(tmp / "state"), "--on-ask", "deny", "--agent-dir",
             str(tmp / "agent"), "--project", str(tmp / "project"), "--history"],
            cwd=REPO, stderr=subprocess.DEVNULL,
        )
        beat = root / "serving" / f"{encode_session_id(SESSION)}.json"
        while not beat.exists():
            if proc.poll() is not None:
                raise RuntimeError("serve did not start")
            time.sleep(0.01)
        try:
            plain = burst(session, count, base_request, "plain")
            facts = burst(session, count, with_facts, "facts")
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        print(f"under cProfile: {count / plain:.0f}/s without facts, {count / facts:.0f}/s with facts")
        if keep is not None:
            keep.write_bytes(out.read_bytes())
        stats = pstats.Stats(str(out))
        total = stats.total_tt  # type: ignore[attr-defined]
        print(f"serving thread: {total / (2 * count) * 1e6:.0f} µs per ask (profiled, all functions)")
        stats.sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--keep", type=Path, help="also save the cProfile stats here")
    args = parser.parse_args()
    micro()
    if args.profile:
        profile(args.profile, args.top, args.keep)


if __name__ == "__main__":
    main()
