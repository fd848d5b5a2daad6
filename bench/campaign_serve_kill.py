"""Issue 32's hidden check for local serving, as our own tool: `pi-authorizer serve` killed with SIGKILL
every `--kill-every` seconds (seeded) while children write bursts of asks, restarted at once; then
every request id is replayed (the same bytes, and altered bytes) and the history is compared with what
every child read.

Run: `nice -n 10 uv run python -m bench.campaign_serve_kill [--seed 1] [--sessions 2] [--bursts 20]
[--burst 100] [--burst-every 0] [--kill-every 0.5:2] [--child-timeout 60] [--keep DIR]`.

One serve process, `--sessions` sessions, rules that allow `ls *` and deny `rm *` (everything else
denied at once, `--on-ask deny`). The children (in this process) write `--burst` asks per session at
once, `--bursts` times, each burst when the last is read (or every `--burst-every` s); they poll their
responses folder, delete what they read and their request, as a pi child does. When every ask is read
(or past its deadline), each id is written again twice: first with the bytes the child wrote, then with
altered bytes (another command, a fresh `createdAt`), each replay waited on until serve has taken it
from the inbox. Serve is still killed during the replays. Then serve is stopped cleanly and the history
read.

Findings:
- `replay-answered`: a response file appeared for a replayed id that was answered before (an id
  answered once is never answered again: its replay is quarantined without an answer), or for both
  replays of an id never answered;
- `replay-not-quarantined`: a replay left the inbox without a trace in the quarantine or the history;
- `replay-quarantined-without-history-row`: the quarantine folder holds a replay the history does not
  (a run killed between the move and the row);
- `answered-twice`: a response file appeared after the child had read one, or the history holds two
  answered rows for one id;
- `written-after-the-child-gave-up`: the child stopped waiting at its deadline (and removed its
  request), yet a response was linked afterwards and the history says it was written;
- `history-contradicts-child`: an answered row holds other response bytes than the child read, or the
  child read an answer no row holds;
- `open-with-verdict`: a row with a verdict and no `ended_at` after a clean stop.

Counted, not a contradiction: `delivery-unknown`, a row holding the bytes the child read whose
`written` is unknown (the run that linked the response was killed before noting it, and the child had
read and removed it before the restart: the history cannot know which).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench.campaign_common import (
    Child,
    Node,
    dump_asks,
    history_rows,
    request_bytes,
    response_verdict,
    stop_all,
    table,
    wait_for_log,
    write_atomically,
)
from core.disk.paths import encode_session_id


class Killer:
    """Kills serve `low`–`high` s (seeded) after it says it serves again, and starts it again at once
    (counted from its "serving" line, so a slow start on a loaded machine still gets time to serve)."""

    def __init__(self, node: Node, rng: random.Random, low: float, high: float) -> None:
        self.node, self.rng, self.low, self.high = node, rng, low, high
        self.kills = 0
        self.offset = 0
        self.next: float | None = time.monotonic() + rng.uniform(low, high)

    def tick(self) -> None:
        now = time.monotonic()
        if self.next is None:
            with self.node.log.open("rb") as log:
                log.seek(self.offset)
                if b"serving session" in log.read():
                    self.next = now + self.rng.uniform(self.low, self.high)
            return
        if now >= self.next:
            with (self.node.folder / "faults.log").open("a") as out:
                out.write(f"{time.time():.3f} SIGKILL serve pid {self.node.pid()}\n")
            self.node.kill()
            self.offset = self.node.log.stat().st_size
            self.node.start()
            self.kills += 1
            self.next = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--bursts", type=int, default=20)
    parser.add_argument("--burst", type=int, default=100, help="asks per session per burst")
    parser.add_argument("--burst-every", type=float, default=0.0,
                        help="seconds between bursts (0: each burst once the last is read)")
    parser.add_argument("--kill-every", default="0.5:2", help="MIN:MAX seconds between kills")
    parser.add_argument("--child-timeout", type=float, default=60.0, help="the child's deadline (s)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run's folders here")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="campaign-serve-", dir=args.keep))
    print(f"campaign folder: {folder}")
    try:
        found = run(args, folder)
    finally:
        stop_all()
    raise SystemExit(1 if found else 0)


def run(args: argparse.Namespace, folder: Path) -> int:
    rng = random.Random(args.seed)  # noqa: S311 - a reproducible schedule, not a secret
    low, high = (float(x) for x in args.kill_every.split(":"))
    root, agent, state = folder / "root", folder / "agent", folder / "state"
    root.mkdir()
    agent.mkdir()
    rules = folder / "rules.json"
    rules.write_text(json.dumps({"forwardingTimeoutMs": int(args.child_timeout * 1000),
                                 "permission": {"bash": {"ls *": "allow", "rm *": "deny"}}}))
    sessions = [f"serve-{i}" for i in range(args.sessions)]
    argv = ["serve", *[w for s in sessions for w in ("--session", s)], "--forwarding-root", str(root),
            "--state-dir", str(state), "--rules", str(rules), "--on-ask", "deny"]
    serve = Node("serve", folder, argv, env={"PI_CODING_AGENT_DIR": str(agent)})
    children = [Child(root, s, args.child_timeout) for s in sessions]
    serve.start()
    wait_for_log(serve, "serving session")
    killer = Killer(serve, rng, low, high)
    started = time.monotonic()
    n = 0
    kinds = ("ls", "rm", "cat")
    for burst in range(args.bursts):
        for j, child in enumerate(children):
            for _ in range(args.burst):
                child.ask(f"s{j}-{n:06d}", f"{rng.choice(kinds)} f{n}")
                n += 1
        next_burst = started + (burst + 1) * args.burst_every
        last = burst == args.bursts - 1
        while any(child.open for child in children) if (last or not args.burst_every) else \
                time.monotonic() < next_burst:
            for child in children:
                child.poll()
            killer.tick()
            time.sleep(0.01)
    asking = time.monotonic() - started
    kills_asking = killer.kills
    print(f"asked {n} in {asking:.0f} s, serve killed {kills_asking} times; replaying every id")
    quarantine = state / "quarantine"
    seen: dict[str, dict[str, str]] = {child.session: {} for child in children}
    replays_began = time.time()
    replays: dict[str, list[str]] = defaultdict(list)  # rid -> what happened to each replay
    for altered in (False, True):
        for child in children:
            for rid, ask in child.asks.items():
                data = request_bytes(rid, child.session, ask.command, int(ask.sent_at * 1000))
                if altered:
                    data = request_bytes(rid, child.session, f"ls replayed-{rid}", int(time.time() * 1000))
                write_atomically(child.requests, f"{rid}.json", data)
                child.open[rid] = ask  # a response now is a second answer: noted by `stray` below
        replay_started = time.monotonic()
        while True:
            pending = [rid for child in children for rid in child.open
                       if (child.requests / f"{rid}.json").exists()]
            for child in children:
                _collect_replay_answers(child, replays)
            killer.tick()
            for child in children:  # often: the quarantine keeps only its newest 1,000 entries
                _look_at_quarantine(quarantine, child.session, seen[child.session])
            if not pending:
                break
            if time.monotonic() - replay_started > max(60.0, args.child_timeout * 2):
                for rid in pending:
                    replays[rid].append("left in the inbox")
                break
            time.sleep(0.05)
        for child in children:
            _collect_replay_answers(child, replays)
            child.open.clear()
            _look_at_quarantine(quarantine, child.session, seen[child.session])
    kills = killer.kills
    serve.stop()
    for child in children:
        _collect_replay_answers(child, replays)
    for child in children:
        _look_at_quarantine(quarantine, child.session, seen[child.session])
    return report(args, folder, children, state, seen, replays, replays_began, n, asking, kills_asking, kills)


def _collect_replay_answers(child: Child, replays: dict[str, list[str]]) -> None:
    """A response to a replay is a second answer: kept in `replays`, removed as the child would."""
    try:
        names = os.listdir(child.responses)
    except OSError:
        return
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = child.responses / name
        try:
            data = path.read_bytes()
        except OSError:
            continue
        replays[name[:-5]].append(f"answered {response_verdict(data)}")
        path.unlink(missing_ok=True)
        (child.requests / name).unlink(missing_ok=True)


def _look_at_quarantine(quarantine: Path, session: str, seen: dict[str, str]) -> None:
    """Adds to `seen` (entry → request id) what the quarantine holds for `session` now: looked at after
    each replay round, as it keeps only its newest 1,000 entries."""
    where = quarantine / encode_session_id(session)
    if not where.is_dir():
        return
    for entry in os.listdir(where):  # `<stamp>-<ns>-<pid>.<serial>-<name>.reason.json`
        if entry.endswith(".reason.json") and entry.count("-") >= 3:
            seen[entry] = entry.removesuffix(".reason.json").split("-", 3)[3].removesuffix(".json")


def report(args: argparse.Namespace, folder: Path, children: list[Child], state: Path,
           seen: dict[str, dict[str, str]],
           replays: dict[str, list[str]], replays_began: float, asked: int, asking: float, kills_asking: int,
           kills: int) -> int:
    rows = history_rows(state)
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_id[row["request_id"] or row["request_name"]].append(row)
    found: dict[str, list[str]] = defaultdict(list)
    dump_asks(folder, children)
    read: Counter[str] = Counter()
    held_all = {child.session: Counter(seen[child.session].values()) for child in children}
    for row in rows:
        if row["verdict"] is not None and row["ended_at"] is None:
            found["open-with-verdict"].append(f"row {row['id']} {row['request_id']} {row['verdict']} "
                                              f"outcome {row['outcome']}")
    for child in children:
        held = held_all[child.session]
        for rid, ask in child.asks.items():
            read[ask.read_verdict()] += 1
            first = [r for r in by_id.get(rid, []) if r["arrived_at"] < replays_began]
            answered = [r for r in first if r["response"] is not None and r["written"]]
            if len(answered) > 1:
                found["answered-twice"].append(f"{rid}: {len(answered)} answered rows "
                                               f"({[r['verdict'] for r in answered]})")
            held_bytes = [r for r in first if r["response"] is not None and bytes(r["response"]) == ask.read]
            if ask.read is not None and not held_bytes:
                found["history-contradicts-child"].append(
                    f"{rid}: child read {ask.read_verdict()}; no row holds those bytes: "
                    f"{[(r['id'], r['verdict'], r['outcome'], r['written']) for r in first]}")
            elif ask.read is not None and not answered:
                if any(r["written"] == 0 for r in held_bytes):
                    found["history-contradicts-child"].append(f"{rid}: the child read it; the row says "
                                                              "not written")
                else:  # written unknown: the run that wrote it died before noting it (not a contradiction)
                    found["delivery-unknown (not a contradiction)"].append(rid)
            late = child.stray.get(rid, []) if ask.read is None else []
            if ask.read is None and (answered or late):
                found["written-after-the-child-gave-up"].append(
                    f"{rid}: the child gave up at its deadline; rows say written "
                    f"{[(r['id'], r['verdict'], r['outcome']) for r in answered]}, {len(late)} late file(s)")
            if ask.read is not None and rid in child.stray:
                found["answered-twice"].append(f"{rid}: {len(child.stray[rid])} response file(s) after the "
                                               "child's read")
            was_answered = ask.read is not None or bool(answered) or any(r["verdict"] for r in first)
            answers = [x for x in replays.get(rid, []) if x.startswith("answered")]
            if answers and (was_answered or len(answers) > 1):
                found["replay-answered"].append(f"{rid}: {answers} (first read {ask.read_verdict()})")
            quarantined = sum(1 for r in by_id.get(rid, []) if r["outcome"] == "quarantined")
            if held[rid] > quarantined:
                found["replay-quarantined-without-history-row"].append(
                    f"{rid}: {held[rid]} in the quarantine folder, {quarantined} quarantined rows")
            traced = max(held[rid], quarantined)
            if traced < 2 - len(answers) and "left in the inbox" not in replays.get(rid, []):
                found["replay-not-quarantined"].append(f"{rid}: {traced} of 2 replays in the quarantine "
                                                       "or the history")
            if "left in the inbox" in replays.get(rid, []):
                found["replay-not-taken"].append(rid)
    kinds = ["replay-answered", "replay-not-quarantined", "replay-quarantined-without-history-row",
             "replay-not-taken", "answered-twice", "written-after-the-child-gave-up",
             "history-contradicts-child", "open-with-verdict"]
    soft = "delivery-unknown (not a contradiction)"
    print(f"\ncampaign_serve_kill seed {args.seed}: {len(children)} sessions, {asked} asks in {asking:.0f} s")
    print(table([("asks", asked), ("child read approved", read["approved"]),
                 ("child read denied", read["denied"]), ("child read nothing", read["none"]),
                 ("serve SIGKILLed while asking", kills_asking), ("serve SIGKILLed in all", kills),
                 ("replays written", 2 * asked), ("history rows", len(rows))]))
    print("findings:")
    print(table([(k, len(found[k])) for k in [*kinds, soft]]))
    for kind in kinds:
        for line in found[kind][:8]:
            print(f"  {kind}: {line}")
    (folder / "findings.json").write_text(json.dumps({"seed": args.seed, "asks": asked, "kills": kills,
                                                      "found": dict(found)}, indent=1))
    print(f"details: {folder / 'findings.json'}")
    return sum(len(found[k]) for k in kinds)


if __name__ == "__main__":
    main()
