"""A second server racing the same inbox during a burst answered at once (issue 37, campaign3): pi's own
20.7.3 in-pi server (`tests/interop/node/serve_reference.ts`, approves everything) started mid-burst
beside `pi-authorizer serve` (history on), which denies every ask at once (a rule, or the fail-safe):
so any approval a child reads is the other server's.

Run: `nice -n 10 uv run python -m bench.campaign_foreign [--asks 2000] [--seed 1] [--start-at 0:1.5]
[--other-for 4] [--dir /tmp]`. Needs node and `npm ci` in tests/interop/node.

A child per ask polls `responses/`, reads its answer once and removes it and its request; an inotify
watch counts every entry made under each name. The other server runs `--other-for` s, then is killed
(serve serves the inbox again). Findings (`findings.json`):
- `unanswered`: a child read nothing;
- `history-contradicts-child`: a row says this node's denial was written (not contested) while its
  child read an approval;
- `denial-without-written-row`: the child read this node's denial and no row says it was written;
- `several-entries (apart)`: more than one response entry appeared under one name (the other server's
  rename over ours, or ours after the child removed the other's): counted, each with its row's outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.campaign_common import (
    history_rows,
    request_bytes,
    response_verdict,
    responses_appeared,
    serve_beating,
    table,
)
from core.disk.paths import encode_session_id
from core.forwarding.inotify import IN_CREATE, IN_MOVED_TO, IN_ONLYDIR, Inotify

REPO = Path(__file__).resolve().parents[1]
NODE_DIR = REPO / "tests" / "interop" / "node"
SESSION = "019ff969-c34c-70be-9034-fae19c852932"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start-at", default="0:1.5",
                        help="MIN:MAX s after the burst the other server starts (below 0: ready before it)")
    parser.add_argument("--other-for", type=float, default=4.0, help="seconds the other server runs")
    parser.add_argument("--within", type=float, default=200.0)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--checkout", type=Path, default=REPO, help="run serve from this checkout")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="campaign-foreign-", dir=args.dir))
    print(f"campaign folder: {folder}")
    raise SystemExit(1 if run(args, folder) else 0)


def run(args: argparse.Namespace, folder: Path) -> int:
    rng = random.Random(args.seed)  # noqa: S311 - a reproducible mix, not a secret
    root, state, agent, staging = folder / "root", folder / "state", folder / "agent", folder / "staging"
    session = root / "sessions" / encode_session_id(SESSION)
    requests, responses = session / "requests", session / "responses"
    for path in (requests, responses, staging, agent):
        path.mkdir(parents=True)
    rules = folder / "rules.json"
    rules.write_text(json.dumps({"permission": {"bash": {"rm *": "deny"}}}))
    for i in range(args.asks):
        rid = f"f-{i:06d}"
        body = json.loads(request_bytes(rid, SESSION, f"rm f{i}", int(time.time() * 1000)))
        if rng.random() < 0.3:
            body["accessIntent"]["matchValues"] = [f"cat f{i}"]  # no rule: the fail-safe's
        (staging / f"{rid}.json").write_bytes(json.dumps(body).encode())
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent)}
    log_path = folder / "serve.log"
    with log_path.open("ab") as log:
        serve = subprocess.Popen(
            ["nice", "-n", "10", sys.executable, "-m", "tui.cli", "serve", "--session", SESSION,
             "--forwarding-root", str(root), "--state-dir", str(state), "--rules", str(rules),
             "--on-ask", "deny"], cwd=args.checkout, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
    serve_beating(root, SESSION, serve, log_path)
    node = shutil.which("node")
    assert node is not None, "node is needed"
    other_cmd = [node, str(NODE_DIR / "node_modules" / "tsx" / "dist" / "cli.mjs"),
                 str(NODE_DIR / "serve_reference.ts"), str(root), SESSION]
    low, high = (float(x) for x in args.start_at.split(":"))
    start_other = rng.uniform(low, high)
    other: subprocess.Popen[bytes] | None = None
    other_until: float | None = None
    faults = folder / "faults.log"

    def start() -> subprocess.Popen[bytes]:
        with (folder / "other.stderr").open("ab") as err, (folder / "other.stdout").open("ab") as out:
            return subprocess.Popen(other_cmd, cwd=NODE_DIR, stdout=out, stderr=err, start_new_session=True,
                                    env={k: v for k, v in os.environ.items() if not k.startswith("PI_")})

    if start_other < 0:  # ready before the burst
        other = start()
        while b"ready" not in (folder / "other.stdout").read_bytes():
            time.sleep(0.05)
        time.sleep(-start_other)
        other_until = args.other_for
        with faults.open("a") as out:
            out.write(f"other server pid {other.pid} ready {-start_other:.2f} s before the burst\n")
    ino = Inotify()
    ino.add_watch(str(responses), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)
    appeared: Counter[str] = Counter()
    overflowed = False
    read: dict[str, bytes] = {}
    started = time.monotonic()
    for name in sorted(os.listdir(staging)):
        os.rename(staging / name, requests / name)
    while time.monotonic() - started < args.within:
        now = time.monotonic() - started
        if other is None and other_until is None and now >= start_other:
            other = start()
            other_until = now + args.other_for
            with faults.open("a") as out:
                out.write(f"other server pid {other.pid} started at {now:.2f} s, {len(read)} answers read\n")
        elif other is not None and other_until is not None and now >= other_until:
            os.killpg(other.pid, signal.SIGKILL)
            other.wait(30)
            other = None
            with faults.open("a") as out:
                out.write(f"other server killed at {now:.2f} s, {len(read)} answers read\n")
        overflowed = responses_appeared(ino, appeared) or overflowed
        try:
            names = os.listdir(responses)
        except FileNotFoundError:  # the other server removes an emptied session folder
            names = []
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            try:
                data = (responses / name).read_bytes()
                json.loads(data)
            except (OSError, ValueError):
                continue
            read.setdefault(name[:-5], data)
            (responses / name).unlink(missing_ok=True)
            (requests / name).unlink(missing_ok=True)
        if len(read) == args.asks and other is None and other_until is not None:
            break
    time.sleep(1.0)
    if other is not None:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait(30)
    os.killpg(serve.pid, signal.SIGTERM)
    serve.wait(120)
    ino.close()
    return report(folder, state, args, read, appeared, overflowed)


def report(folder: Path, state: Path, args: argparse.Namespace, read: dict[str, bytes],
           appeared: Counter[str], overflowed: bool) -> int:
    rows = defaultdict(list)
    for row in history_rows(state):
        rows[row["request_name"].removesuffix(".json")].append(row)
    found: dict[str, list[str]] = defaultdict(list)
    verdicts: Counter[str] = Counter()
    for i in range(args.asks):
        rid = f"f-{i:06d}"
        got = read.get(rid)
        verdict = response_verdict(got)
        verdicts[str(verdict)] += 1
        rows_of = rows.get(rid, [])
        written = [r for r in rows_of if r["written"]]
        if got is None:
            found["unanswered"].append(f"{rid}: rows {[(r['outcome'], r['written']) for r in rows_of]}")
            continue
        if verdict == "approved" and written:
            found["history-contradicts-child"].append(
                f"{rid}: {[(r['outcome'], r['verdict'], r['written']) for r in written]}")
        if verdict == "denied" and not any(bytes(r["response"] or b"") == got for r in written):
            found["denial-without-written-row"].append(
                f"{rid}: {[(r['outcome'], r['verdict'], r['written']) for r in rows_of]}")
        if not overflowed and appeared[rid] > 1:
            found["several-entries (apart)"].append(
                f"{rid}: {appeared[rid]} entries, child read {verdict}, rows "
                f"{[(r['outcome'], r['written']) for r in rows_of]}")
    log_text = (folder / "serve.log").read_text(errors="replace")
    print(f"\ncampaign_foreign seed {args.seed}: {args.asks} asks; load {os.getloadavg()[0]:.1f}")
    print((folder / "faults.log").read_text() if (folder / "faults.log").exists() else "the other never ran")
    print(table([*((f"child read {k}", v) for k, v in sorted(verdicts.items())),
                 ("contested rows", sum(r["outcome"] == "contested" for rs in rows.values() for r in rs)),
                 ("'another server answers' lines", log_text.count("another server answers session")),
                 ("'serving it again' lines", log_text.count("serving it again")),
                 ("inotify overflowed", overflowed)]))
    kinds = ["unanswered", "history-contradicts-child", "denial-without-written-row"]
    print("findings:")
    print(table([(k, len(found[k])) for k in [*kinds, "several-entries (apart)"]]))
    for kind in [*kinds, "several-entries (apart)"]:
        for line in found[kind][:8]:
            print(f"  {kind}: {line}")
    (folder / "findings.json").write_text(json.dumps(found, indent=1))
    return sum(len(found[k]) for k in kinds)


if __name__ == "__main__":
    main()
