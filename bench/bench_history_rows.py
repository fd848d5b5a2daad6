"""The history's CPU per ask in a burst, alone: what `serve` asks of it, in its order, on a real file.

Run: `uv run python -m bench.bench_history_rows [--asks 10000] [--batch 256] [--dir /dev/shm] [--rounds 5]`.

Per ask, as in a burst: the `arrived` event (queued), `expect` (its verdict is on its way), `--ahead`
asks before its batch is recorded (the intake reads a burst faster than batches commit); per batch of
`--batch` asks: `record_verdicts` (one fsynced transaction: each verdict written with its queued
arrival as one row) and `mark_written`; per batch also the intake's `recorded_verdicts` lookup of the
next batch's ids (none found). The asks alternate a request without facts (denied fail-safe) and one
with facts (a rule allows), as the two kinds of `bench.bench_race`. Printed: CPU µs per ask (this
process: user + system) for each step and in all, the median and range over rounds, with the load
average; a round is a fresh history file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from core.history import HistoryStore, Retention
from core.serving.verdicts import VerdictRecord, WrittenMark
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.decisions import RuleDecision, UnavailableDecision
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response

SESSION = "bench-session"


def request(i: int) -> bytes:
    body: dict[str, object] = {
        "id": f"r{i}", "createdAt": 1_765_000_000_000 + i, "requesterSessionId": "child",
        "targetSessionId": SESSION, "requesterAgentName": "Explore",
        "message": "Agent 'Explore' requested bash command 'ls'.", "surface": "bash", "value": "ls",
    }
    if i % 2:
        body["value"] = f"git status r{i}"
        body["accessIntent"] = {
            "surface": "bash", "matchValues": [f"git status r{i}"], "boundaryValue": None,
            "requesterCwd": "/w", "principal": {"sessionId": "child", "agentName": "Explore"},
        }
    return json.dumps(body).encode()


async def one_round(folder: Path, asks: int, batch: int, ahead: int) -> dict[str, float]:
    """CPU seconds per step for `asks` asks through a fresh history in `folder` (on an event loop, as
    `serve` observes: arrivals are queued, not written one by one), `ahead` arrivals observed before
    the batch whose verdicts are recorded next."""
    parsed = [parse_request(request(i)) for i in range(asks)]
    denied = deny(responder=SESSION, at_ms=0, decided_by=UnavailableDecision(reason="no rule, no person"))
    allowed = approve(responder=SESSION, at_ms=0,
                      decided_by=RuleDecision(surface="bash", pattern="git status *", origin="global"))
    bodies = {id(denied): encode_response(denied), id(allowed): encode_response(allowed)}
    path = folder / f"rows-{time.monotonic_ns()}.sqlite3"
    store = HistoryStore(path, Retention(max_age_s=None, max_rows=None))
    spent = dict.fromkeys(("arrivals", "lookups", "record_verdicts", "mark_written"), 0.0)
    try:
        observed = 0
        for start in range(0, asks, batch):
            chunk = list(enumerate(parsed[start : start + batch], start))
            keys = [AskKey(SESSION, f"r{i}.json") for i, _ in chunk]
            clock = time.process_time()
            store.recorded_verdicts(SESSION, [p.request.id for _, p in chunk])
            spent["lookups"] += time.process_time() - clock
            clock = time.process_time()
            for i in range(observed, min(asks, start + batch + ahead)):
                key = AskKey(SESSION, f"r{i}.json")
                store.observe(ServeEvent("arrived", key, time.time(), parsed=parsed[i], raw=parsed[i].raw))
                store.expect(key)
                observed = i + 1
            spent["arrivals"] += time.process_time() - clock
            verdicts = []
            for key, (i, p) in zip(keys, chunk, strict=True):
                response = allowed if i % 2 else denied
                outcome = "rule" if i % 2 else "fail-safe"
                verdicts.append(VerdictRecord(key, p, response, bodies[id(response)], outcome))
            clock = time.process_time()
            store.record_verdicts(verdicts)
            spent["record_verdicts"] += time.process_time() - clock
            marks = [WrittenMark(v.key, v.request_id, True) for v in verdicts]
            clock = time.process_time()
            store.mark_written(marks)
            spent["mark_written"] += time.process_time() - clock
    finally:
        store.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--asks", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ahead", type=int, default=2_000, help="arrivals queued beyond the next batch")
    parser.add_argument("--dir", default=None, help="where the history file is made (e.g. /dev/shm)")
    args = parser.parse_args()
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for _ in range(args.rounds):
            rounds.append(asyncio.run(one_round(Path(tmp), args.asks, args.batch, args.ahead)))
    load = os.getloadavg()[0]
    print(f"{args.asks:,} asks in batches of {args.batch} ({args.ahead:,} more arrivals queued), "
          f"{args.rounds} rounds, load {load:.2f}:")
    for step in (*rounds[0], "all"):
        per_ask = [(sum(r.values()) if step == "all" else r[step]) / args.asks * 1e6 for r in rounds]
        print(f"  {step:16} {statistics.median(per_ask):6.1f} µs per ask "
              f"(rounds {min(per_ask):.1f}–{max(per_ask):.1f})")


if __name__ == "__main__":
    main()
