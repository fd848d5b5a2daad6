"""One burst of mixed asks against one `pi-authorizer serve`, every guarantee checked per ask (issue 37:
the batched hot path must keep them all).

Run: `nice -n 10 uv run python -m bench.campaign_burst [--asks 3000] [--seed 1] [--on-ask deny]
[--malformed SHARE] [--kills N] [--kill-after 0.2:1.5] [--dir /tmp] [--keep DIR] [--checkout DIR]`.

Serve (history on) allows `ls *` and denies `rm *` by rule and leaves the rest to `--on-ask`. Every
request is written to a staging folder first, then all are renamed into the inbox in one go, a mix of:
`ls` with facts (a rule allows), `rm` with facts (a rule denies), the same `ls` or `rm` again and
again (judged once, kept), `cat` with facts (the person's: `--on-ask`), `ls` without facts (no rule
can judge it: the person's, denied by the fail-safe when `--on-ask deny`) and malformed files with
safe names (quarantined with a reason, their child answered with an explained denial).
A child polls `responses/`, reads each answer once and deletes it and its request, as a pi child
does; an inotify watch of `responses/` counts every entry that appears under each name (a second one
is an answer given twice, or a response replaced). After the last answer (or `--within` s) serve is
stopped cleanly and its history read. `--kills N`: serve is SIGKILLed `--kill-after` s after the burst
(then after each restart says it serves) and started again at once, N times, while the burst is
answered.

Campaign5 (issue 37's sixth pass: `responses/` vouched for by its own watch): `--tiny-queue N` starts
each serve with the kernel's inotify queue at N events (`/proc/sys/fs/inotify/max_queued_events`, root;
read by the kernel when an instance is made, so it is set back once serve says it serves, and in any
case at the end); `--swap-outbox K` replaces `responses/` K times during the burst (at random moments
within `--meddle-within`): renamed away, a new folder made in its place, every entry moved into it,
the old one removed (whatever serve linked into the old one meanwhile is moved too); the moves back
are not counted as a response appearing again.

Stall6 (a serve that did not stop on SIGTERM): `--stop-within S` (default 30) bounds the wait for
serve to end after the closing SIGTERM, and `--kill-with TERM` makes each of `--kills` a SIGTERM
bounded the same way (a stop mid-burst, while a restart reconciles its backlog); a serve still
running then is a `did-not-stop` finding, its stacks taken (`campaign_common.take_stacks`: threads,
its unix sockets' queues, `py-spy dump` when on PATH) into `stacks.txt`, then killed. `--watch-silence
S` takes the stacks once per serve when no answer was read for S s while some are missing.
`--selfpipe` runs each serve with `bench/selfpipe.py` as its `sitecustomize` (notes in `selfpipe/`:
the event loop's self-pipe peaks and writers); `--selfpipe-term` also raises SIGTERM in serve the
first time its self-pipe is full, as a stop arriving then would (`selfpipe-summary` says what followed).

Campaign6 (issue 37's seventh pass: a burst's rows counted from the first, its marks ranged):
`--only-state-on-full` puts the history alone on the `--full-disk` tmpfs (the inbox stays where it
can be written: answers linked while their rows' commits and marks are refused, then retried);
`--hostile-kinds withdrawn` makes every meddling a child's withdrawal (with a small `--meddle-within`,
requests deleted while their burst is being answered).

Counted per ask (`findings.json`): `unanswered` (a valid or safe-named ask with no response),
`answered-twice` (a second response under one name, or two answered rows), `wrong-verdict` (not what
the rules, the fail-safe or `--on-ask` say), `history-contradicts-child` (no row holds the bytes the
child read, or a row says not written), `no-history-row`, `open-row`, `not-quarantined` (a malformed
file with no `.reason.json` in the quarantine or no quarantined row with a reason; with the
quarantine at `QUARANTINE_MAX_ENTRIES`, one missing there whose row says quarantined is counted
apart, `quarantine-trimmed`), and every
traceback or ERROR line in serve's log.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from bench.campaign_common import (
    request_bytes,
    response_verdict,
    responses_appeared,
    rows_by_request,
    serve_beating,
    table,
    take_stacks,
)
from core.disk.paths import encode_session_id
from core.forwarding.inotify import IN_CREATE, IN_MOVED_TO, IN_ONLYDIR, Inotify
from core.serving.quarantine import QUARANTINE_MAX_ENTRIES

REPO = Path(__file__).resolve().parents[1]
SESSION = "burst-session"
KINDS = ("allow", "rule-deny", "person", "fail-safe", "malformed", "same-allow", "same-deny")
#: Shares of each kind; `--malformed` replaces the malformed share (the quarantine keeps its newest
#: 1,000 entries per session: keep it under that).
WEIGHTS = (0.2, 0.1, 0.15, 0.1, 0.25, 0.1, 0.1)
#: What no rule decides (the person's, and an ask without facts): `--on-ask leave` leaves it unanswered.
LEFT = ("person", "fail-safe")
#: `--hostile SHARE`: asks a rule allows that someone else meddles with (campaign3, the at-once lane):
#: a forged response planted before the burst, or during it (created without replacing, as a racing
#: forger would, at a random moment); the request withdrawn (unlinked) during it; or another file
#: (`rm`, a rule denies) renamed over the request during it. Their child does not read a forged
#: response (what is left at the end is checked); a withdrawn ask's child stops reading.
HOSTILE = ("forged-before", "forged-during", "withdrawn", "renamed-over")
FORGED = b'{"approved":true,"state":"approved","forged":true}'


def malformed_bytes(rid: str, rng: random.Random) -> bytes:
    """A file with a safe name serving cannot use (each a way the reader refuses)."""
    good = json.loads(request_bytes(rid, SESSION, f"ls {rid}", int(time.time() * 1000)))
    choice = rng.randrange(8)
    if choice == 0:
        return b'{"id": "' + rid.encode() + b'", "createdAt": '  # cut short
    if choice == 1:
        return b"[1, 2, 3]"
    if choice == 2:
        del good["requesterSessionId"]
    elif choice == 3:
        good["id"] = 12345
    elif choice == 4:
        good["createdAt"] = "yesterday"
    elif choice == 5:
        return json.dumps(good).encode().replace(b"Explore", b"Expl\xff\xfere", 1)
    elif choice == 6:
        return json.dumps(good).encode().replace(str(good["createdAt"]).encode(), b"NaN", 1)
    else:
        good["createdAt"] = True
    return json.dumps(good).encode()


def fail_safe_bytes(rid: str) -> bytes:
    """A valid request without facts (`accessIntent`): only the fail-safe can answer it, a denial."""
    body = json.loads(request_bytes(rid, SESSION, "ls", int(time.time() * 1000)))
    del body["accessIntent"]
    return json.dumps(body).encode()


def ask_bytes(kind: str, rid: str, name: str, now_ms: int, rng: random.Random) -> bytes:
    """The request file of one ask of `kind` (`KINDS`)."""
    if kind == "malformed":
        return malformed_bytes(rid, rng)
    if kind == "fail-safe":
        return fail_safe_bytes(rid)
    if kind.startswith("same-"):  # one command asked again and again: judged once, kept
        name = "same"
    verb = {"allow": "ls", "rule-deny": "rm", "person": "cat", "same-allow": "ls", "same-deny": "rm"}[kind]
    return request_bytes(rid, SESSION, f"{verb} {name}", now_ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kills", type=int, default=0, help="SIGKILL serve this many times mid-burst")
    parser.add_argument("--kill-after", default="0.2:1.5",
                        help="MIN:MAX seconds after the burst (then after each restart) to kill")
    parser.add_argument("--malformed", type=float, default=None, help="share of malformed files")
    parser.add_argument("--on-ask", default="deny", choices=("deny", "leave"))
    parser.add_argument("--hostile", type=float, default=0.0, help="share of meddled-with asks (HOSTILE)")
    parser.add_argument("--meddle-within", type=float, default=3.0,
                        help="the meddling happens this many seconds after the burst at most")
    parser.add_argument("--within", type=float, default=300.0, help="seconds to wait for every answer")
    parser.add_argument("--dir", type=Path, default=None, help="where the run's folder is made")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run's folder here")
    parser.add_argument("--checkout", type=Path, default=REPO, help="run serve from this checkout")
    parser.add_argument("--full-disk", type=int, default=0, metavar="MIB",
                        help="campaign3: the inbox (and the state with --state-on-full) on a tmpfs of this "
                             "size in a private mount namespace (root), filled during the burst, then freed")
    parser.add_argument("--state-on-full", action="store_true", help="the history on the full tmpfs too")
    parser.add_argument("--only-state-on-full", action="store_true",
                        help="campaign6: the history alone on the full tmpfs (the inbox elsewhere)")
    parser.add_argument("--hostile-kinds", default=",".join(HOSTILE),
                        help="campaign6: the meddlings --hostile picks from (of HOSTILE, comma-separated)")
    parser.add_argument("--linger", type=float, default=1.0, help="seconds serve runs after the last answer")
    parser.add_argument("--fill-at", default="0.1:1.0", help="MIN:MAX s after the burst to fill the disk")
    parser.add_argument("--full-for", type=float, default=4.0, help="seconds the disk stays full")
    parser.add_argument("--tiny-queue", type=int, default=0, metavar="N",
                        help="campaign5: each serve's inotify queue holds N events (root)")
    parser.add_argument("--swap-outbox", type=int, default=0, metavar="K",
                        help="campaign5: responses/ replaced by a new folder K times mid-burst")
    parser.add_argument("--kill-with", default="KILL", choices=("KILL", "TERM"),
                        help="stall6: the signal of each of --kills (TERM: a clean stop, bounded)")
    parser.add_argument("--stop-within", type=float, default=30.0,
                        help="stall6: seconds serve may take to end after SIGTERM")
    parser.add_argument("--selfpipe", action="store_true",
                        help="stall6: count serve's self-pipe wake-ups (bench/selfpipe.py)")
    parser.add_argument("--selfpipe-term", action="store_true",
                        help="stall6: with --selfpipe, SIGTERM raised in serve once its self-pipe is full")
    parser.add_argument("--watch-silence", type=float, default=20.0,
                        help="stall6: take serve's stacks after this many seconds without an answer")
    args = parser.parse_args()
    if args.full_disk and not os.environ.get("CAMPAIGN_IN_NAMESPACE"):
        sys.stdout.flush()
        command = ["unshare", "-m", "--propagation", "private", sys.executable, "-m", "bench.campaign_burst",
                   *sys.argv[1:]]
        os.execvpe("unshare", command, {**os.environ, "CAMPAIGN_IN_NAMESPACE": "1"})  # noqa: S606
    where = args.keep or args.dir
    if where is not None:
        where.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="campaign-burst-", dir=where))
    print(f"campaign folder: {folder}")
    raise SystemExit(1 if run(args, folder) else 0)


def run(args: argparse.Namespace, folder: Path) -> int:
    rng = random.Random(args.seed)  # noqa: S311 - a reproducible mix, not a secret
    root, state, agent = folder / "root", folder / "state", folder / "agent"
    staging = folder / "staging"
    if args.full_disk:  # the inbox (and its staging, for the renames) on a small tmpfs of its own
        fs = folder / "fs"
        fs.mkdir()
        size = f"size={args.full_disk}m"
        subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(fs)], check=True)
        if not args.only_state_on_full:
            root, staging = fs / "root", fs / "staging"
        if args.state_on_full or args.only_state_on_full:
            state = fs / "state"
    session = root / "sessions" / encode_session_id(SESSION)
    requests, responses = session / "requests", session / "responses"
    for path in (requests, responses, staging, agent):
        path.mkdir(parents=True)
    rules = folder / "rules.json"
    rules.write_text(json.dumps({"forwardingTimeoutMs": int(args.within * 1000),
                                 "permission": {"bash": {"ls *": "allow", "rm *": "deny"}}}))
    weights = list(WEIGHTS)
    hostile_kinds = [kind for kind in HOSTILE if kind in args.hostile_kinds.split(",")]
    if args.malformed is not None:
        weights[KINDS.index("malformed")] = args.malformed
    kind_of: dict[str, str] = {}
    sent: dict[str, bytes] = {}
    replacement: dict[str, bytes] = {}
    meddling: list[tuple[float, str]] = []  # (seconds after the burst, rid)
    for i in range(args.asks):
        rid = f"b-{i:06d}"
        kind = rng.choices(KINDS, weights)[0]
        if args.hostile and rng.random() < args.hostile:
            kind = rng.choice(hostile_kinds)
            data = request_bytes(rid, SESSION, f"ls f{i}", int(time.time() * 1000))
            (staging / f"{rid}.json").write_bytes(data)
            kind_of[rid], sent[rid] = kind, data
            replacement[rid] = request_bytes(rid, SESSION, f"rm f{i}", int(time.time() * 1000))
            if kind != "forged-before":
                meddling.append((rng.uniform(0, args.meddle_within), rid))
            continue
        now_ms = int(time.time() * 1000)
        data = ask_bytes(kind, rid, f"f{i}", now_ms, rng)
        (staging / f"{rid}.json").write_bytes(data)
        kind_of[rid], sent[rid] = kind, data
    log_path = folder / "serve.log"
    argv = ["nice", "-n", "10", sys.executable, "-m", "tui.cli", "serve", "--session", SESSION,
            "--forwarding-root", str(root), "--state-dir", str(state), "--rules", str(rules),
            "--on-ask", args.on_ask]
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent)}
    if args.selfpipe or args.selfpipe_term:
        site, notes = folder / "site", folder / "selfpipe"
        site.mkdir()
        notes.mkdir()
        shutil.copy(REPO / "bench" / "selfpipe.py", site / "sitecustomize.py")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))
        env["SELFPIPE_OUT"] = str(notes)
        if args.selfpipe_term:
            env["SELFPIPE_TERM"] = "1"

    def start() -> subprocess.Popen[bytes]:
        if args.tiny_queue:  # read by the kernel at serve's `inotify_init`: set back once both are made
            MAX_QUEUED.write_text(f"{args.tiny_queue}\n")
        with log_path.open("ab") as log:
            proc = subprocess.Popen(argv, cwd=args.checkout, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env)
        if args.tiny_queue:
            inotify_made(proc)
            queue_back(args)
        return proc

    args.queue_was = MAX_QUEUED.read_text() if args.tiny_queue else None
    current = [start()]
    try:
        return serve_burst(args, folder, rng, current, start, root, state, requests, responses, staging,
                           log_path, kind_of, sent, replacement, meddling)
    finally:
        if current[0].poll() is None:  # a failure of the campaign itself: serve is not left running
            os.killpg(current[0].pid, signal.SIGKILL)
        queue_back(args)


MAX_QUEUED = Path("/proc/sys/fs/inotify/max_queued_events")


def queue_back(args: argparse.Namespace) -> None:
    """The kernel's inotify queue limit as it was before `--tiny-queue`."""
    if getattr(args, "queue_was", None) is not None and MAX_QUEUED.read_text() != args.queue_was:
        MAX_QUEUED.write_text(args.queue_was)


def inotify_made(proc: subprocess.Popen[bytes], within: float = 60.0) -> None:
    """Wait until serve (`nice` execs it: the same pid) holds its three inotify instances (`requests/`,
    `responses/`, its rules file), or is gone."""
    deadline = time.monotonic() + within
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            links = [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{proc.pid}/fd")]
        except OSError:
            links = []
        if sum(link == "anon_inode:inotify" for link in links) >= 3:
            return
        time.sleep(0.01)


def swap_outbox(responses: Path, k: int, ino: Inotify, moved_back: Counter[str], clobbered: set[str]) -> str:
    """`responses/` replaced by a new folder (`--swap-outbox`), its entries moved in; what was moved."""
    old = responses.with_name(f"responses.swapped-{k}")
    os.rename(responses, old)
    responses.mkdir()
    ino.add_watch(str(responses), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)
    moved = 0
    while True:
        for name in os.listdir(old):
            try:  # never replacing: serve may have linked its answer into the new folder already
                os.link(old / name, responses / name, follow_symlinks=False)
            except FileExistsError:
                clobbered.add(name[:-5])  # the mover's loss (the older entry dropped), not serve's
            else:
                moved += 1
            os.unlink(old / name)
            if name.endswith(".json") and not name.startswith("."):
                moved_back[name[:-5]] += 1
        try:
            old.rmdir()
        except OSError as exc:  # serve linked one more into the old folder meanwhile
            if exc.errno != errno.ENOTEMPTY:
                raise
            continue
        return f"{moved} entries moved"


def serve_burst(args: argparse.Namespace, folder: Path, rng: random.Random,
                current: list[subprocess.Popen[bytes]],
                start: Callable[[], subprocess.Popen[bytes]], root: Path, state: Path, requests: Path,
                responses: Path, staging: Path, log_path: Path, kind_of: dict[str, str],
                sent: dict[str, bytes], replacement: dict[str, bytes],
                meddling: list[tuple[float, str]]) -> int:
    proc = current[0]
    serve_beating(root, SESSION, proc, log_path)
    swaps = sorted(rng.uniform(0, args.meddle_within) for _ in range(args.swap_outbox))
    moved_back: Counter[str] = Counter()
    clobbered: set[str] = set()  # names the mover found taken in the new folder (it dropped the old entry)
    low, high = (float(x) for x in args.kill_after.split(":"))
    fill_low, fill_high = (float(x) for x in args.fill_at.split(":"))
    fill_at = rng.uniform(fill_low, fill_high) if args.full_disk else None
    freed_at: float | None = None
    kills: list[float] = []
    next_kill = time.monotonic() + rng.uniform(low, high) if args.kills else None
    restarted, offset = False, 0
    ino = Inotify()
    ino.add_watch(str(responses), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)
    appeared: Counter[str] = Counter()
    meddled: dict[str, str] = {}  # rid -> what the meddling did
    for rid, kind in kind_of.items():
        if kind == "forged-before":
            (responses / f"{rid}.json").write_bytes(FORGED)
            meddled[rid] = "planted"
    meddling.sort()
    overflowed = False
    read: dict[str, tuple[bytes, int, float]] = {}
    started = time.monotonic()
    args.started_wall = time.time()  # read times in asks.json are wall clock (to compare with the log)
    for rid in kind_of:  # the burst: every request renamed in at once
        os.rename(staging / f"{rid}.json", requests / f"{rid}.json")
    burst_s = time.monotonic() - started
    expected = {rid for rid, kind in kind_of.items()
                if not (kind in LEFT and args.on_ask == "leave") and kind not in HOSTILE[:3]}
    # Requests that may stay: forged ones, and with `--on-ask leave` those left to the person (campaign6:
    # the burst ended only at `--within` then).
    may_stay = left_over(kind_of) | {f"{rid}.json" for rid, kind in kind_of.items()
                                     if kind in LEFT and args.on_ask == "leave"}
    second: dict[str, list[bytes]] = defaultdict(list)
    last_read, watched = time.monotonic(), -1  # stall6: the stacks of a silent serve, once per serve
    while time.monotonic() - started < args.within:
        silent = time.monotonic() - last_read
        if watched != proc.pid and silent >= args.watch_silence and expected - read.keys():
            take_stacks(proc.pid, folder / "stacks.txt",
                        f"no answer read for {silent:.0f} s, {len(expected - read.keys())} missing")
            print(f"serve {proc.pid} silent for {silent:.0f} s: stacks in {folder / 'stacks.txt'}")
            watched = proc.pid
        if next_kill is not None and time.monotonic() >= next_kill:
            kills.append(time.monotonic() - started)
            with (folder / "faults.log").open("a") as out:
                out.write(f"{time.time():.3f} SIG{args.kill_with} serve pid {proc.pid} "
                          f"at {kills[-1]:.2f} s\n")
            stop_serve(args, folder, proc, getattr(signal, f"SIG{args.kill_with}"), "mid-burst")
            offset = log_path.stat().st_size
            proc = current[0] = start()
            next_kill = None
            restarted = len(kills) < args.kills  # timed from its "serving" line, as campaign_serve_kill
        elif restarted:
            with log_path.open("rb") as log:
                log.seek(offset)
                if b"serving session" in log.read():
                    next_kill, restarted = time.monotonic() + rng.uniform(low, high), False
        if fill_at is not None and time.monotonic() - started - burst_s >= fill_at:
            fill_at, freed_at = None, time.monotonic() + args.full_for
            filled = fill(folder / "fs" / "filler")
            with (folder / "faults.log").open("a") as out:
                out.write(f"{time.time():.3f} disk filled ({filled} bytes) at "
                          f"{time.monotonic() - started:.2f} s, {len(read)} answers read\n")
        elif freed_at is not None and time.monotonic() < freed_at:
            fill(folder / "fs" / "filler")  # what the children's removals freed: full again
        elif freed_at is not None and time.monotonic() >= freed_at:
            freed_at = None
            (folder / "fs" / "filler").unlink()
            with (folder / "faults.log").open("a") as out:
                out.write(f"{time.time():.3f} disk freed at {time.monotonic() - started:.2f} s, "
                          f"{len(read)} answers read\n")
        while swaps and time.monotonic() - started - burst_s >= swaps[0]:
            swaps.pop(0)
            what = swap_outbox(responses, args.swap_outbox - len(swaps), ino, moved_back, clobbered)
            with (folder / "faults.log").open("a") as out:
                out.write(f"{time.time():.3f} responses/ replaced at {time.monotonic() - started:.2f} s "
                          f"({what}), {len(read)} answers read\n")
        while meddling and time.monotonic() - started - burst_s >= meddling[0][0]:
            _, rid = meddling.pop(0)
            try:
                meddled[rid] = meddle(kind_of[rid], rid, requests, responses, staging, replacement[rid])
            except OSError as exc:  # the meddler's own writes on a full disk
                meddled[rid] = f"failed: {exc.strerror}"
        overflowed = responses_appeared(ino, appeared) or overflowed
        for name in os.listdir(responses):
            if not name.endswith(".json") or name.startswith("."):
                continue
            rid, path = name[:-5], responses / name
            if kind_of.get(rid) in HOSTILE[:3]:
                continue  # forged or withdrawn: not read by its child; what is left is checked at the end
            try:
                data, ino_no = path.read_bytes(), path.stat().st_ino
            except OSError:
                continue
            if rid in read:
                second[rid].append(data)
            else:
                read[rid] = (data, ino_no, time.monotonic() - started)
                last_read = time.monotonic()
            path.unlink(missing_ok=True)
            (requests / name).unlink(missing_ok=True)
        settled = not meddling and not swaps and fill_at is None and freed_at is None
        if expected <= read.keys() and settled and not (set(os.listdir(requests)) - may_stay):
            break
    answered_s = time.monotonic() - started
    time.sleep(args.linger)  # a late second answer would show here (and a late quarantine be done)
    for event in ino.read_events() if select.select([ino.fd], [], [], 0)[0] else []:
        if event.name.endswith(".json") and not event.name.startswith("."):
            appeared[event.name[:-5]] += 1
    left: dict[str, tuple[bytes, int]] = {}  # what the meddled-with asks' responses hold at the end
    for name in os.listdir(responses):
        if name.endswith(".json") and not name.startswith("."):
            if kind_of.get(name[:-5]) in HOSTILE[:3]:
                left[name[:-5]] = ((responses / name).read_bytes(), (responses / name).stat().st_ino)
                continue
            second[name[:-5]].append((responses / name).read_bytes())
    stop_serve(args, folder, proc, signal.SIGTERM, "at the end")
    ino.close()
    appeared.subtract(moved_back)  # `--swap-outbox`: a response moved into the new folder is not a second
    dropped = sorted(rid for rid in clobbered if kind_of.get(rid) in HOSTILE[:2])
    for rid in dropped:  # the forger's entry dropped by the mover, not by serve: not checked
        del kind_of[rid]
    if clobbered:  # any other: a second entry of serve's own under one name, counted by the report
        print(f"--swap-outbox: the name taken in the new folder: {len(dropped)} forged entries dropped "
              f"by the mover (not checked), others {sorted(set(clobbered) - set(dropped))[:10]}")
    if args.full_disk and (args.state_on_full or args.only_state_on_full):  # kept: the tmpfs goes with it
        shutil.copytree(state, folder / "state-kept", ignore=shutil.ignore_patterns("quarantine"))
    status = report(args, folder, state, kind_of, sent, read, second, appeared, overflowed, burst_s,
                    answered_s, len(kills))
    if (folder / "selfpipe").is_dir():
        selfpipe_summary(folder / "selfpipe", read, args.started_wall)
    if args.hostile:
        status += report_hostile(folder, state, kind_of, sent, replacement, read, left, appeared, overflowed,
                                 meddled, requests)
    return status


def stop_serve(args: argparse.Namespace, folder: Path, proc: subprocess.Popen[bytes], sig: int,
               when: str) -> None:
    """`sig` to serve's group; a SIGTERM it has not obeyed within `--stop-within` s is a finding
    (`did-not-stop`, its stacks taken), then it is killed."""
    os.killpg(proc.pid, sig)
    try:
        proc.wait(30 if sig == signal.SIGKILL else args.stop_within)
        return
    except subprocess.TimeoutExpired:
        pass
    take_stacks(proc.pid, folder / "stacks.txt", f"SIGTERM {when} not obeyed within {args.stop_within:.0f} s")
    print(f"serve {proc.pid} did not stop within {args.stop_within:.0f} s of SIGTERM ({when}): stacks in "
          f"{folder / 'stacks.txt'}")
    args.did_not_stop = [*getattr(args, "did_not_stop", []), f"pid {proc.pid}, SIGTERM {when}"]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def selfpipe_summary(notes: Path, read: dict[str, tuple[bytes, int, float]], started_wall: float) -> None:
    """Per serve (`--selfpipe`): its self-pipe's peak, the wake-ups refused, and for a SIGTERM raised
    on a full pipe, whether it reached the loop and how many answers were read after it."""
    print("selfpipe-summary (wake-ups between two reads of the loop's self-pipe; 278 fill it):")
    for note in sorted(notes.glob("*.txt"), key=lambda path: path.stat().st_mtime):
        lines = note.read_text().splitlines()
        peaks = [line for line in lines if " peak " in line]
        said = f"  serve {note.stem}: {peaks[-1].split(' ', 1)[1] if peaks else 'peak under 25'}"
        raised = [float(line.split()[0]) for line in lines if "SIGTERM raised" in line]
        if raised:
            reached = [float(line.split()[0]) for line in lines if "signal 15 reached" in line]
            after = [at + started_wall - raised[0] for _, _, at in read.values()
                     if at + started_wall > raised[0]]
            first = f"{reached[0] - raised[0]:.2f} s after it" if reached else "never"
            said += (f"; SIGTERM raised on a full pipe: {len(after)} answers read after it (the last "
                     f"{max(after, default=0):.2f} s after), the first signal through the pipe {first} "
                     "(the campaign's closing SIGTERM, if after the last answer)")
        print(said)


def fill(filler: Path) -> int:
    """Grow `filler` until its filesystem refuses (ENOSPC); how many bytes it took."""
    size = 0
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (65536, 4096):
            while True:
                try:
                    size += os.write(fd, b"x" * chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return size


def left_over(kind_of: dict[str, str]) -> set[str]:
    """Request files a burst may leave: forged ones (quarantined as forged, or still there)."""
    return {f"{rid}.json" for rid, kind in kind_of.items() if kind in ("forged-before", "forged-during")}


def meddle(kind: str, rid: str, requests: Path, responses: Path, staging: Path, replacement: bytes) -> str:
    """Someone else's move on an ask during the burst (`HOSTILE`); what it did."""
    name = f"{rid}.json"
    if kind == "forged-during":
        try:
            fd = os.open(responses / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return "too late: a response was there"
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(FORGED)
        except OSError as exc:  # created, its bytes refused (a full disk): a forged file all the same
            return f"planted, cut short: {exc.strerror}"
        return "planted"
    if kind == "withdrawn":
        try:
            os.unlink(requests / name)
        except FileNotFoundError:
            return "gone already"
        return "withdrawn"
    temp = staging / f"{rid}.over"
    temp.write_bytes(replacement)
    if not (requests / name).exists():
        temp.unlink()
        return "gone already"
    os.rename(temp, requests / name)
    return "renamed over"


def report_hostile(folder: Path, state: Path, kind_of: dict[str, str], sent: dict[str, bytes],
                   replacement: dict[str, bytes], read: dict[str, tuple[bytes, int, float]],
                   left: dict[str, tuple[bytes, int]], appeared: Counter[str], overflowed: bool,
                   meddled: dict[str, str], requests: Path) -> int:
    """Every meddled-with ask against what serve must do (campaign3): a forged response never replaced
    (one entry under its name, still the forger's bytes) and no row saying ours was written; a
    withdrawn ask's row says written exactly when a response appeared; a renamed-over ask answered once,
    its row holding what its child read and the request it answered."""
    by_id = rows_by_request(state)
    found: dict[str, list[str]] = defaultdict(list)
    outcomes: Counter[str] = Counter()
    for rid, kind in kind_of.items():
        if kind not in HOSTILE:
            continue
        did, rows_of = meddled.get(rid, "not done"), by_id.get(rid, [])
        written = [r for r in rows_of if r["written"]]
        entries = appeared[rid]
        if not overflowed and entries > 1:
            found["response-replaced-or-twice"].append(f"{rid} ({kind}, {did}): {entries} entries appeared")
        if kind.startswith("forged"):
            forged = did.startswith("planted")  # cut short: a start of `FORGED` (stall6)
            outcomes[f"{kind}: {did}"] += 1
            if forged:
                if rid in left and not FORGED.startswith(left[rid][0]):
                    found["forged-replaced"].append(f"{rid} ({kind}): it holds {left[rid][0][:80]!r}")
                if written:
                    found["forged-row-says-written"].append(
                        f"{rid} ({kind}): {[(r['outcome'], r['written']) for r in written]}")
                if (requests / f"{rid}.json").exists():
                    found["forged-request-left"].append(f"{rid} ({kind})")
            elif rid not in left or not any(bytes(r["response"] or b"") == left[rid][0] for r in written):
                found["history-contradicts-response"].append(f"{rid} ({kind}, {did}): no row holds it")
        elif kind == "withdrawn":
            got = left.get(rid)
            outcomes[f"{kind}: {did}, {'answered' if got else 'not answered'}"] += 1
            if got is None and written:
                found["written-but-no-response"].append(
                    f"{rid}: {[(r['outcome'], r['written']) for r in written]}")
            if got is not None and not any(bytes(r["response"] or b"") == got[0] for r in rows_of):
                found["response-without-row"].append(f"{rid}: {got[0][:80]!r}")
        else:
            got_read = read.get(rid)
            verdict = response_verdict(None if got_read is None else got_read[0])
            outcomes[f"{kind}: {did}, child read {verdict}"] += 1
            if got_read is None:
                found["renamed-over-unanswered"].append(f"{rid} ({did})")
                continue
            holding = [r for r in rows_of if bytes(r["response"] or b"") == got_read[0]]
            if not holding:
                found["history-contradicts-child"].append(f"{rid} ({kind}, {did}): no row holds it")
                continue
            raw = bytes(holding[0]["raw"] or b"")
            want = sent[rid] if verdict == "approved" else replacement[rid]
            if raw and raw != want:
                found["answered-other-bytes"].append(f"{rid}: {verdict} for {raw[:60]!r}")
    print("meddled with (campaign3):")
    print(table(sorted(outcomes.items())))
    kinds = ["response-replaced-or-twice", "forged-replaced", "forged-row-says-written",
             "forged-request-left",
             "history-contradicts-response", "written-but-no-response", "response-without-row",
             "renamed-over-unanswered", "history-contradicts-child", "answered-other-bytes"]
    print("hostile findings:")
    print(table([(k, len(found[k])) for k in kinds]))
    for kind in kinds:
        for line in found[kind][:8]:
            print(f"  {kind}: {line}")
    found_all = {"outcomes": dict(outcomes), "found": dict(found)}
    (folder / "hostile.json").write_text(json.dumps(found_all, indent=1))
    return sum(len(found[k]) for k in kinds)


def report(args: argparse.Namespace, folder: Path, state: Path, kind_of: dict[str, str],
           sent: dict[str, bytes], read: dict[str, tuple[bytes, int, float]],
           second: dict[str, list[bytes]], appeared: Counter[str], overflowed: bool,
           burst_s: float, answered_s: float, kills: int) -> int:
    by_id = rows_by_request(state)
    found: dict[str, list[str]] = defaultdict(list)
    held: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    where = state / "quarantine" / encode_session_id(SESSION)
    for entry in os.listdir(where) if where.is_dir() else []:
        if entry.endswith(".reason.json") and entry.count("-") >= 3:
            rid = entry.removesuffix(".reason.json").split("-", 3)[3].removesuffix(".json")
            held[rid] += 1
            try:
                note = json.loads((where / entry).read_text())
            except ValueError:  # a reason file holding no reason (finding B)
                found["reason-file-unreadable"].append(entry)
                continue
            reasons[rid] = note.get("reason", "") if note.get("childAnswered") else ""
    trimmed = sum(held.values()) >= QUARANTINE_MAX_ENTRIES
    want = {"allow": "approved", "rule-deny": "denied", "person": "denied", "fail-safe": "denied",
            "malformed": "denied", "same-allow": "approved", "same-deny": "denied"}
    for rid, kind in kind_of.items():
        if kind in HOSTILE:
            continue  # `report_hostile`
        got = read.get(rid)
        rows_of = by_id.get(rid, [])
        if kind in LEFT and args.on_ask == "leave":
            if got is not None:
                found["answered-while-left"].append(f"{rid}: {response_verdict(got[0])}")
            continue
        if got is None:
            outcomes = [(r["outcome"], r["reason"]) for r in rows_of]
            found["unanswered"].append(f"{rid} ({kind}): rows {outcomes}")
            continue
        if second.get(rid) or (not overflowed and appeared[rid] > 1):
            found["answered-twice"].append(f"{rid} ({kind}): {appeared[rid]} entries appeared, "
                                           f"{len(second.get(rid, []))} read after the first")
        verdict = response_verdict(got[0])
        if verdict != want[kind]:
            found["wrong-verdict"].append(f"{rid} ({kind}): {verdict}")
        if not rows_of:
            found["no-history-row"].append(f"{rid} ({kind})")
            continue
        answered = [r for r in rows_of if r["response"] is not None and r["written"]]
        if len(answered) > 1:
            found["answered-twice"].append(f"{rid} ({kind}): {len(answered)} answered rows")
        if kind == "malformed" and all(r["response"] is None for r in rows_of):
            found["quarantined-row-holds-no-response (apart)"].append(f"{rid}: child read {verdict}")
            holding = rows_of
        else:
            holding = [r for r in rows_of if r["response"] is not None and bytes(r["response"]) == got[0]]
        if not holding:
            seen = [(r["id"], r["verdict"], r["written"]) for r in rows_of]
            found["history-contradicts-child"].append(f"{rid} ({kind}): no row holds the bytes read; {seen}")
        elif kind != "malformed" and any(r["written"] == 0 for r in holding) and not any(
                r["written"] for r in holding):
            found["history-contradicts-child"].append(f"{rid} ({kind}): the row says written "
                                                      f"{[r['written'] for r in holding]}")
        elif kind != "malformed" and not any(r["written"] for r in holding):
            found["delivery-unknown (apart)"].append(f"{rid} ({kind})")  # killed before noting it
        strict = args.on_ask == "deny"  # a left ask's row stays open
        if any(r["ended_at"] is None and (r["verdict"] is not None or strict) for r in rows_of):
            found["open-row"].append(f"{rid} ({kind})")
        if kind == "malformed":
            quarantined = [r for r in rows_of if r["outcome"] == "quarantined" and r["reason"]]
            if not held[rid] and kills and quarantined:  # the child removed it before a restart moved it
                found["quarantined-row-file-gone (apart)"].append(rid)
            elif not held[rid] and trimmed and quarantined:  # the quarantine kept its newest (campaign6)
                found["quarantine-trimmed (apart)"].append(rid)
            elif not held[rid] or not reasons.get(rid):
                found["not-quarantined"].append(f"{rid}: {held[rid]} in the quarantine folder, "
                                                "or its note says its child was not answered")
            if not quarantined:
                found["not-quarantined"].append(f"{rid}: no quarantined row with a reason "
                                                f"{[(r['outcome'], r['reason']) for r in rows_of]}")
        elif held[rid]:
            found["quarantined-valid-ask"].append(f"{rid} ({kind}): {reasons.get(rid)}")
        if rows_of and bytes(rows_of[0]["raw"] or b"") not in (sent[rid], b""):
            found["raw-differs"].append(f"{rid} ({kind})")
    found["did-not-stop"] = list(getattr(args, "did_not_stop", []))
    log_text = (folder / "serve.log").read_text(errors="replace")
    for line in log_text.splitlines():
        if "Traceback" in line or " ERROR " in line or " CRITICAL " in line:
            found["log-error"].append(line[:300])
    counts = Counter(kind_of.values())
    print(f"\ncampaign_burst seed {args.seed}, --on-ask {args.on_ask}: {len(kind_of)} asks renamed in "
          f"{burst_s:.2f} s, answered by {answered_s:.1f} s; load {os.getloadavg()[0]:.1f}")
    print(table([*((f"asks {k}", counts[k]) for k in KINDS), ("responses read", len(read)),
                 ("history rows", sum(map(len, by_id.values()))), ("quarantine entries", sum(held.values())),
                 ("serve SIGKILLed mid-burst", kills), ("inotify overflowed", overflowed)]))
    kinds = ["unanswered", "answered-twice", "answered-while-left", "wrong-verdict", "no-history-row",
             "history-contradicts-child", "open-row", "not-quarantined", "quarantined-valid-ask",
             "raw-differs", "reason-file-unreadable", "log-error", "did-not-stop"]
    apart = ["quarantined-row-holds-no-response (apart)", "delivery-unknown (apart)",
             "quarantined-row-file-gone (apart)", "quarantine-trimmed (apart)"]
    print("findings:")
    print(table([(k, len(found[k])) for k in [*kinds, *apart]]))
    for kind in kinds:
        for line in found[kind][:8]:
            print(f"  {kind}: {line}")
    started_wall = getattr(args, "started_wall", 0.0)
    (folder / "findings.json").write_text(json.dumps(
        {"seed": args.seed, "asks": len(kind_of), "kinds": dict(counts), "found": dict(found)}, indent=1))
    (folder / "asks.json").write_text(json.dumps(
        {rid: {"kind": kind_of[rid], "sent": sent[rid].decode("utf-8", "replace"),
               "read": None if rid not in read else read[rid][0].decode("utf-8", "replace"),
               "read_at": None if rid not in read else read[rid][2] + started_wall,
               "again": [data.decode("utf-8", "replace") for data in second.get(rid, [])]}
         for rid in kind_of}, indent=0))
    return sum(len(found[k]) for k in kinds)


if __name__ == "__main__":
    main()
