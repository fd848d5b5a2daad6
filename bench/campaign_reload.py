"""A narrowing config reload racing a burst answered at once (issue 37, campaign3): `serve` allows `ls *`
by its `--rules` file; a burst of `ls` asks is renamed in, and while the disk thread judges it the file
is rewritten to deny `ls *` (a narrowing reload applies at once). Once serve's log says the rules were
reloaded, more `ls` asks are written: every one must be denied. The burst's approvals placed after
the reload was applied (judged before it) are counted, with how long after: the window.

Run: `nice -n 10 uv run python -m bench.campaign_reload [--asks 6000] [--late 200] [--seed 1]
[--narrow-at 0.2:1.0] [--same] [--dir /tmp]`.

`--same` (campaign6, issue 37's seventh pass: the cache of identical facts,
`RecordedAuthority.decided_plain`): every ask, of the burst and late, is the one command `ls same`,
so each is decided from the cache but the first under each reading: a late ask approved is the cache
outliving the reload.

Findings: `late-approved` (an ask written after the reload was applied read an approval),
`unanswered`, `answered-twice` (a second entry under one name), `history-contradicts-child` (no
written row holds the bytes the child read).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench.campaign_common import history_rows, request_bytes, response_verdict, table
from core.disk.paths import encode_session_id
from core.forwarding.inotify import IN_CREATE, IN_MOVED_TO, IN_ONLYDIR, Inotify

REPO = Path(__file__).resolve().parents[1]
SESSION = "reload-session"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=6000)
    parser.add_argument("--late", type=int, default=200, help="asks written once the reload is applied")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--narrow-at", default="0.2:1.0", help="MIN:MAX s after the burst to narrow")
    parser.add_argument("--within", type=float, default=200.0)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--same", action="store_true", help="every ask the one command `ls same` (campaign6)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="campaign-reload-", dir=args.dir))
    print(f"campaign folder: {folder}")
    raise SystemExit(1 if run(args, folder) else 0)


def rules_text(action: str) -> str:
    return json.dumps({"forwardingTimeoutMs": 600_000, "permission": {"bash": {"ls *": action}}})


def command(args: argparse.Namespace, name: str) -> str:
    """The command of an ask: its own, or with `--same` the one every ask repeats."""
    return "ls same" if args.same else f"ls {name}"


def run(args: argparse.Namespace, folder: Path) -> int:
    rng = random.Random(args.seed)  # noqa: S311 - a reproducible moment, not a secret
    root, state, agent, staging = folder / "root", folder / "state", folder / "agent", folder / "staging"
    requests = root / "sessions" / encode_session_id(SESSION) / "requests"
    responses = requests.parent / "responses"
    for path in (requests, responses, staging, agent):
        path.mkdir(parents=True)
    rules = folder / "rules" / "rules.json"
    rules.parent.mkdir()
    rules.write_text(rules_text("allow"))
    for i in range(args.asks):
        (staging / f"b-{i:06d}.json").write_bytes(request_bytes(f"b-{i:06d}", SESSION, command(args, f"b{i}"),
                                                                 int(time.time() * 1000)))
    log_path = folder / "serve.log"
    with log_path.open("ab") as log:
        serve = subprocess.Popen(
            ["nice", "-n", "10", sys.executable, "-m", "tui.cli", "serve", "--session", SESSION,
             "--forwarding-root", str(root), "--state-dir", str(state), "--rules", str(rules),
             "--on-ask", "deny"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PI_CODING_AGENT_DIR": str(agent)})
    try:
        return race(args, folder, rng, serve, log_path, rules, requests, responses, staging, state)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)


def race(args: argparse.Namespace, folder: Path, rng: random.Random, serve: subprocess.Popen[bytes],
         log_path: Path, rules: Path, requests: Path, responses: Path, staging: Path, state: Path) -> int:
    beat = requests.parents[2] / "serving" / f"{encode_session_id(SESSION)}.json"
    while not beat.exists():
        if serve.poll() is not None:
            raise RuntimeError(log_path.read_text()[-2000:])
        time.sleep(0.05)
    ino = Inotify()
    ino.add_watch(str(responses), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)
    appeared: Counter[str] = Counter()
    placed_at: dict[str, float] = {}
    read: dict[str, bytes] = {}
    started = time.monotonic()
    for name in sorted(os.listdir(staging)):
        os.rename(staging / name, requests / name)
    narrow_at = started + rng.uniform(*(float(x) for x in args.narrow_at.split(":")))
    narrowed = applied = None
    late: list[str] = []
    while time.monotonic() - started < args.within:
        now = time.monotonic()
        if narrowed is None and now >= narrow_at:
            fresh = rules.with_suffix(".new")
            fresh.write_text(rules_text("deny"))
            os.replace(fresh, rules)
            narrowed, offset = now, log_path.stat().st_size
        elif narrowed is not None and applied is None:
            with log_path.open("rb") as log:
                log.seek(offset)
                if b"rules reloaded" in log.read():
                    applied = time.monotonic()  # seen in the log: the reload returned before
                    for i in range(args.late):
                        rid = f"l-{i:06d}"
                        temp = requests / f".{rid}.tmp"
                        late_ask = request_bytes(rid, SESSION, command(args, f"l{i}"),
                                                 int(time.time() * 1000))
                        temp.write_bytes(late_ask)
                        os.rename(temp, requests / f"{rid}.json")
                        late.append(rid)
        if select.select([ino.fd], [], [], 0.01)[0]:
            for event in ino.read_events():
                if event.name.endswith(".json") and not event.name.startswith("."):
                    appeared[event.name[:-5]] += 1
                    placed_at.setdefault(event.name[:-5], time.monotonic())
        for name in os.listdir(responses):
            if name.endswith(".json") and not name.startswith("."):
                try:
                    read.setdefault(name[:-5], (responses / name).read_bytes())
                except OSError:
                    continue
                (responses / name).unlink(missing_ok=True)
                (requests / name).unlink(missing_ok=True)
        if applied is not None and len(read) == args.asks + args.late:
            break
    time.sleep(1.0)
    os.killpg(serve.pid, signal.SIGTERM)
    serve.wait(120)
    ino.close()
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in history_rows(state):
        rows[str(row["request_name"]).removesuffix(".json")].append(row)
    found: dict[str, list[str]] = defaultdict(list)
    after: list[float] = []
    ids = [f"b-{i:06d}" for i in range(args.asks)] + late
    for rid in ids:
        got = read.get(rid)
        if got is None:
            found["unanswered"].append(rid)
            continue
        verdict = response_verdict(got)
        if rid in late and verdict == "approved":
            found["late-approved"].append(rid)
        if appeared[rid] > 1:
            found["answered-twice"].append(f"{rid}: {appeared[rid]}")
        if not any(r["written"] and bytes(r["response"] or b"") == got for r in rows.get(rid, [])):
            found["history-contradicts-child"].append(rid)
        if applied is not None and verdict == "approved" and placed_at.get(rid, 0.0) > applied:
            after.append(placed_at[rid] - applied)
    verdicts = Counter(str(response_verdict(read.get(rid))) for rid in ids if not rid.startswith("l-"))
    print(f"\ncampaign_reload seed {args.seed}: {args.asks} + {len(late)} late asks; "
          f"load {os.getloadavg()[0]:.1f}")
    print(table([*((f"burst read {k}", v) for k, v in sorted(verdicts.items())),
                 ("reload seen applied after the rewrite (s)",
                  "never" if applied is None or narrowed is None else f"{applied - narrowed:.3f}"),
                 ("burst approvals placed after it was applied", len(after)),
                 ("the last of them, after it (s)", f"{max(after):.3f}" if after else "-")]))
    kinds = ["late-approved", "unanswered", "answered-twice", "history-contradicts-child"]
    print("findings:")
    print(table([(k, len(found[k])) for k in kinds]))
    for kind in kinds:
        for line in found[kind][:8]:
            print(f"  {kind}: {line}")
    (folder / "findings.json").write_text(json.dumps({"found": found, "after": after}, indent=1))
    return sum(len(found[k]) for k in kinds)


if __name__ == "__main__":
    main()
