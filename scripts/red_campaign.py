"""Red-team campaign against the serving core: hostile children, a fake person, failing disks and
histories, kill -9 and restart; every promise checked at the end from the files and the SQLite history.

Two modes, both seeded (the children's operations are reproducible; the thread interleaving is the
point of the exercise and is not) and bounded in time:

- `inproc`: one `ServingCore` with real rules, a `Person` driven by a fake person, a real
  history behind a ledger that fails at random, a `DiskWriter` that fails at random; children in
  threads write bursts, withdraw, replay ids, forge responses, rewrite requests in place, swap in
  links, FIFOs, hard links and huge files, and replace `responses/` by a link for a moment.
- `kill`: a real `pi-authorizer serve` (rules, history, fail-safe terminal) killed with -9 at random
  moments of a burst and restarted; afterwards every request was answered exactly once, with the
  bytes its history recorded.

    uv run python scripts/red_campaign.py inproc --seeds 1-5 --seconds 20
    uv run python scripts/red_campaign.py kill --seeds 1-3 --seconds 20

Exits 1 and prints every violation found.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import json
import logging
import os
import random
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.disk.anonymous import Staged
from core.disk.paths import encode_session_id
from core.disk.writer import DiskWriter
from core.history import HistoryStore
from core.judging.recorded import RecordedAuthority
from core.person import DecisionRefused, Person
from core.rules import PolicyStore
from core.seams import Seams
from core.serving import ServingCore
from core.serving.verdicts import VerdictRecord, WrittenMark
from core.testing import LedgerOver
from core.vocabulary.events import ServeEvent
from core.wire.response import parse_response

S = "019ff969-c34c-70be-9034-fae19c852932"
CHILD = "019ff96a-1111-7000-8000-aaaaaaaaaaaa"
RULES = {"permission": {"bash": {"*": "ask", "git status": "allow", "rm *": "deny"}}}
COMMANDS = ["git status", "rm -rf /tmp/x", "ls", "cat secrets", "git status", "make"]


def body(request_id: str, command: str, facts: bool = True) -> dict[str, Any]:
    """A request as the real child writes it (with the child-fixed facts, or the legacy shape)."""
    data: dict[str, Any] = {
        "id": request_id,
        "createdAt": int(time.time() * 1000),
        "requesterSessionId": CHILD,
        "targetSessionId": S,
        "requesterAgentName": "Explore",
        "message": f"Agent 'Explore' requested bash command '{command}'. Allow this command?",
        "source": "tool_call",
        "surface": "bash",
        "value": command,
    }
    if facts:
        data["accessIntent"] = {
            "surface": "bash",
            "matchValues": [command],
            "boundaryValue": None,
            "requesterCwd": "/home/me/project",
            "principal": {"sessionId": CHILD, "agentName": "Explore"},
        }
    return data


SWAP = threading.Lock()
"""`responses/` is swapped for a link by one child at a time (the campaign's own moves use paths)."""


class Tree:
    """The session's folders, and atomic writes the way a child does them."""

    def __init__(self, root: Path) -> None:
        self.session = root / "sessions" / encode_session_id(S)
        self.requests = self.session / "requests"
        self.responses = self.session / "responses"

    def write(self, name: str, data: bytes) -> None:
        self.requests.mkdir(parents=True, exist_ok=True)
        temp = self.requests / f"{name}.{threading.get_ident()}.{time.time_ns()}.tmp"
        temp.write_bytes(data)
        os.rename(temp, self.requests / name)


class Log:
    """What the children did, for the checks (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: list[tuple[float, str, str]] = []
        self.consumed: dict[str, list[bytes]] = defaultdict(list)

    def note(self, op: str, request_id: str) -> None:
        with self.lock:
            self.ops.append((time.monotonic(), op, request_id))

    def ids(self, op: str) -> set[str]:
        with self.lock:
            return {rid for _, o, rid in self.ops if o == op}


# -- the in-process mode ---------------------------------------------------------------------------


class FlakyDisk(DiskWriter):
    """Fails like a full or broken disk, at random."""

    def __init__(self, rng: random.Random, rate: float) -> None:
        self.rng, self.rate, self.lock = rng, rate, threading.Lock()

    def _maybe(self) -> None:
        with self.lock:
            fail = self.rng.random() < self.rate
        if fail:
            raise OSError(errno.ENOSPC, "No space left on device (campaign)")

    def write_new(self, dir_fd: int, name: str, data: bytes) -> None:
        self._maybe()
        super().write_new(dir_fd, name, data)

    def write_unsynced(self, dir_fd: int, name: str, data: bytes) -> None:
        self._maybe()
        super().write_unsynced(dir_fd, name, data)

    def stage(self, dir_fd: int, name: str, data: bytes, sync: bool) -> Staged:
        self._maybe()
        return super().stage(dir_fd, name, data, sync)

    def place(self, dir_fd: int, staged: Staged, target: str) -> bool:
        self._maybe()
        return super().place(dir_fd, staged, target)


class FlakyLedger(LedgerOver):
    """The real history, whose writes fail at random (a locked or broken SQLite)."""

    def __init__(self, store: HistoryStore, rng: random.Random, rate: float) -> None:
        super().__init__(store)
        self.rng, self.rate, self.lock = rng, rate, threading.Lock()

    def _maybe(self) -> None:
        with self.lock:
            fail = self.rng.random() < self.rate
        if fail:
            raise sqlite3.OperationalError("database is locked (campaign)")

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        self._maybe()
        super().record_verdicts(verdicts)

    def mark_written(self, marks: Sequence[WrittenMark]) -> None:
        self._maybe()
        super().mark_written(marks)


def child(tree: Tree, outside: Path, rng: random.Random, log: Log, stop: threading.Event, n: int) -> None:
    """One hostile child: a random walk of operations until `stop`."""
    serial = 0
    mine: list[str] = []

    def new_id() -> str:
        nonlocal serial
        serial += 1
        return f"c{n}-{serial}"

    while not stop.is_set():
        op = rng.choices(
            [
                "write",
                "burst",
                "withdraw",
                "replay",
                "forge",
                "rewrite",
                "symlink",
                "fifo",
                "hardlink",
                "huge",
                "garbage",
                "consume",
                "swap_responses",
                "socket",
                "grow",
                "swap_session",
            ],
            [30, 4, 10, 3, 2, 4, 2, 1, 2, 1, 3, 12, 1, 1, 3, 1],
        )[0]
        try:
            if op in ("write", "burst"):
                for _ in range(1 if op == "write" else rng.randint(20, 120)):
                    rid = new_id()
                    tree.write(
                        f"{rid}.json",
                        json.dumps(body(rid, rng.choice(COMMANDS), rng.random() < 0.8)).encode(),
                    )
                    mine.append(rid)
                    log.note("write", rid)
            elif op == "withdraw" and mine:
                rid = rng.choice(mine[-20:])
                with contextlib.suppress(FileNotFoundError):
                    (tree.requests / f"{rid}.json").unlink()
                    log.note("withdraw", rid)
            elif op == "replay" and mine:
                rid = rng.choice(mine)
                tree.write(f"{rid}.json", json.dumps(body(rid, "git status")).encode())
                log.note("replay", rid)
            elif op == "forge" and mine and not tree.responses.is_symlink():
                rid = mine[-1]
                tree.responses.mkdir(parents=True, exist_ok=True)
                forged = {
                    "id": rid,
                    "approved": True,
                    "state": "approved",
                    "responderSessionId": S,
                    "respondedAt": 1,
                }
                with contextlib.suppress(FileExistsError):
                    fd = os.open(tree.responses / f"{rid}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    os.write(fd, json.dumps(forged).encode())
                    os.close(fd)
                    log.note("forge", rid)
            elif op == "rewrite" and mine:
                rid = rng.choice(mine[-10:])
                if (tree.requests / f"{rid}.json").exists():
                    tree.write(f"{rid}.json", json.dumps(body(rid, "rm -rf ~")).encode())
                    log.note("rewrite", rid)
            elif op == "symlink":
                rid = new_id()
                (tree.requests).mkdir(parents=True, exist_ok=True)
                os.symlink(outside / "secret.json", tree.requests / f"{rid}.json")
                log.note("odd", rid)
            elif op == "fifo":
                rid = new_id()
                tree.requests.mkdir(parents=True, exist_ok=True)
                os.mkfifo(tree.requests / f"{rid}.json")
                log.note("odd", rid)
            elif op == "hardlink":
                rid = new_id()
                target = outside / f"hard-{n}-{serial}.json"
                target.write_text(json.dumps(body(rid, "git status")))
                tree.requests.mkdir(parents=True, exist_ok=True)
                os.link(target, tree.requests / f"{rid}.json")
                log.note("hardlink", rid)
                mine.append(rid)
                log.note("write", rid)
            elif op == "huge":
                rid = new_id()
                tree.write(f"{rid}.json", b"{" + b" " * (2 << 20) + b"}")
                log.note("odd", rid)
            elif op == "garbage":
                rid = new_id()
                tree.write(f"{rid}.json", rng.randbytes(rng.randint(0, 300)))
                log.note("odd", rid)
            elif op == "consume" and mine:
                rid = rng.choice(mine)
                path = tree.responses / f"{rid}.json"
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    data = path.read_bytes()
                    with log.lock:
                        log.consumed[rid].append(data)
                    path.unlink()
                    with contextlib.suppress(FileNotFoundError):
                        (tree.requests / f"{rid}.json").unlink()
                    log.note("consume", rid)
            elif op == "socket":
                rid = new_id()
                tree.requests.mkdir(parents=True, exist_ok=True)
                os.mknod(tree.requests / f"{rid}.json", stat.S_IFSOCK | 0o600)
                log.note("odd", rid)
            elif op == "grow":  # a valid request that keeps growing while it is read (trailing spaces)
                rid = new_id()
                tree.write(f"{rid}.json", json.dumps(body(rid, rng.choice(COMMANDS))).encode())
                mine.append(rid)
                log.note("write", rid)
                with contextlib.suppress(FileNotFoundError):  # answered and removed already
                    fd = os.open(tree.requests / f"{rid}.json", os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
                    try:
                        for _ in range(rng.randint(1, 5)):
                            os.write(fd, b" " * rng.randint(1, 4096))
                            time.sleep(rng.uniform(0, 0.01))
                    finally:
                        os.close(fd)
                    log.note("grow", rid)
            elif op == "swap_session" and SWAP.acquire(blocking=False):  # the whole session folder
                try:
                    moved = tree.session.with_name(f"{tree.session.name}.away.{n}")
                    os.rename(tree.session, moved)
                    with contextlib.suppress(OSError):  # the server may have made a new one meanwhile
                        os.symlink(outside / "bait-session", tree.session)
                    time.sleep(rng.uniform(0.0, 0.3))
                    put_back_session(tree, moved)
                    log.note("swap", "session")
                finally:
                    SWAP.release()
            elif op == "swap_responses" and SWAP.acquire(blocking=False):  # one swap at a time
                try:
                    moved = tree.session / f"responses.away.{n}"
                    os.rename(tree.responses, moved)
                    with contextlib.suppress(OSError):  # the server may have made a new one meanwhile
                        os.symlink(outside / "elsewhere", tree.responses)
                    time.sleep(rng.uniform(0.0, 0.3))
                    put_back(tree, moved)
                    log.note("swap", "responses")
                finally:
                    SWAP.release()
        except OSError:
            pass  # a folder swapped away by a sibling at this moment
        time.sleep(rng.uniform(0, 0.02))


def put_back(tree: Tree, moved: Path) -> None:
    """The real `responses/` back in place; what the server wrote into a new one meanwhile joins it.
    Tried until it holds: the server may create, write into or remove entries of a new `responses/`
    at any moment (a swap left half undone hid the responses written meanwhile from the checks)."""
    while True:
        try:
            if tree.responses.is_symlink():
                os.unlink(tree.responses)
            while tree.responses.is_dir():
                for entry in tree.responses.iterdir():
                    with contextlib.suppress(FileNotFoundError):  # a temp the server just placed
                        os.rename(entry, moved / entry.name)
                with contextlib.suppress(OSError):
                    os.rmdir(tree.responses)
            os.rename(moved, tree.responses)
            return
        except OSError:
            continue


def put_back_session(tree: Tree, moved: Path) -> None:
    """The real session folder back in place; what the server wrote into a new one meanwhile (its
    heartbeat, a response) joins it. Tried until it holds, like `put_back`."""
    while True:
        try:
            if tree.session.is_symlink():
                os.unlink(tree.session)
            while tree.session.is_dir():
                for sub in tree.session.iterdir():
                    (moved / sub.name).mkdir(exist_ok=True)
                    for entry in sub.iterdir():
                        with contextlib.suppress(FileNotFoundError):
                            os.replace(entry, moved / sub.name / entry.name)
                    with contextlib.suppress(OSError):
                        os.rmdir(sub)
                with contextlib.suppress(OSError):
                    os.rmdir(tree.session)
            os.rename(moved, tree.session)
            return
        except OSError:
            continue


async def play_person(
    person: Person, rng: random.Random, decided: list[tuple[str, str, Any]], stop: asyncio.Event
) -> None:
    """Approves or denies (with a reason) whatever is pending, at random moments."""
    while not stop.is_set():
        pending = person.pending()
        if pending:  # mostly one at a time; sometimes a batch decided at once (the queue's batch press)
            batch = rng.sample(pending, min(len(pending), rng.choice([1, 1, 1, 1, 2, 5])))
            approvals = [rng.random() < 0.5 for _ in batch]
            pairs = zip(batch, approvals, strict=True)
            await asyncio.gather(*(decide(person, a, ok, decided) for a, ok in pairs))
        await asyncio.sleep(rng.uniform(0, 0.03))


async def decide(
    person: Person, ask: Any, approve: bool, decided: list[tuple[str, str, Any]]
) -> None:
    try:
        if approve:
            done = await person.approve_once(ask.key)
        else:
            done = await person.deny(ask.key, "not now")
        decided.append((ask.key.name, done.response.state, ask.parsed.raw))
    except DecisionRefused as exc:
        decided.append((ask.key.name, f"refused: {exc}", ask.parsed.raw))


async def deny_left(person: Person, ask: Any, decided: list[tuple[str, str, Any]]) -> None:
    with contextlib.suppress(DecisionRefused):
        done = await person.deny(ask.key, "campaign over")
        decided.append((ask.key.name, done.response.state, ask.parsed.raw))


class Errors(logging.Handler):
    """Every ERROR logged (a failed serving task, an illegal transition, ...)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


async def inproc(seed: int, seconds: float, base: Path, children: int) -> list[str]:
    root, state, outside, agent = base / "root", base / "state", base / "outside", base / "agent"
    bait = outside / "bait-session"
    for folder in (state, outside / "elsewhere", bait / "requests", bait / "responses"):
        folder.mkdir(parents=True)
    (outside / "secret.json").write_text(json.dumps(body("secret", "git status")))
    (bait / "requests" / "bait.json").write_text(json.dumps(body("bait", "git status")))
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(RULES))
    store = HistoryStore.in_state_dir(state)
    ledger = FlakyLedger(store, seeded(seed + 1), 0.05)
    person = Person()
    judge = RecordedAuthority(PolicyStore(agent, None, None, home="/home/me"))
    core = ServingCore(
        root,
        state,
        person,
        judge=judge,
        ledger=ledger,
        seams=Seams(disk=FlakyDisk(seeded(seed + 2), 0.03), retry_delays=(0.01, 0.02)),
    )
    events: list[ServeEvent] = []
    core.subscribe(store.observe)
    core.subscribe(events.append)
    errors = Errors()
    logging.getLogger("pi_authorizer").addHandler(errors)
    tree = Tree(root)
    tree.requests.mkdir(parents=True)
    tree.responses.mkdir(parents=True)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    log, stop = Log(), threading.Event()
    threads = [
        threading.Thread(target=child, args=(tree, outside, seeded(seed * 100 + i), log, stop, i))
        for i in range(children)
    ]
    decided: list[tuple[str, str, Any]] = []
    person_stop = asyncio.Event()
    deciding = asyncio.create_task(play_person(person, seeded(seed + 3), decided, person_stop))
    for thread in threads:
        thread.start()
    await asyncio.sleep(seconds)
    stop.set()
    for thread in threads:
        await asyncio.to_thread(thread.join)
    # Quiesce: the person denies what is left, all at once (a batch decision), until nothing is being
    # served. The limit is 120 s without progress: on a loaded machine a backlog of hundreds of asks
    # takes longer than that to drain, and an ask whose last write failed must get its next decision.
    person_stop.set()
    await deciding
    last, progress = time.monotonic(), None
    while time.monotonic() - last < 120:
        await core.rescan_all()
        await asyncio.gather(*(deny_left(person, ask, decided) for ask in person.pending()))
        waiting = [r for r in core.served[S].records if r.state != "held"]
        if not waiting and not person.pending():
            break
        if (len(waiting), len(person.pending())) != progress:
            last, progress = time.monotonic(), (len(waiting), len(person.pending()))
        await asyncio.sleep(0.05)
    left = [r for r in core.served[S].records if r.state != "held"]
    stages = Counter(r.state for r in left)
    stuck = [(r.key.name, r.state, person_view(person, r.key), failures(events, r.key.name))
             for r in left[:20]]
    ghosts = [a.key.name for a in person.pending() if "decidable: False" in person_view(person, a.key)]
    control = "control-1"
    tree.write(f"{control}.json", json.dumps(body(control, "git status")).encode())
    for _ in range(600):
        if (tree.responses / f"{control}.json").exists():
            break
        await asyncio.sleep(0.05)
    core.stop()
    await asyncio.wait_for(task, 60)
    logging.getLogger("pi_authorizer").removeHandler(errors)
    bad = check(base, tree, store, events, log, decided, errors.records, control, core)
    if ghosts:
        bad.append(f"in front of the person but not decidable: {ghosts[:20]}")
    if stuck:
        bad.append(f"{len(left)} still being served after the campaign {dict(stages)}: {stuck}")
    return bad


def person_view(person: Person, key: Any) -> str:
    """Whether the person holds this ask, and whether a decision on it can be taken now."""
    held = person.get(key) is not None
    try:
        person.serving_grants(key)
        decidable = True
    except DecisionRefused:
        decidable = False
    return f"person holds it: {held}, decidable: {decidable}"


def failures(events: list[ServeEvent], name: str) -> list[str]:
    return [str(e.reason)[:120] for e in events if e.key.name == name and e.kind == "answer_failed"]


def check(
    base: Path,
    tree: Tree,
    store: HistoryStore,
    events: list[ServeEvent],
    log: Log,
    decided: list[tuple[str, str, Any]],
    errors: list[str],
    control: str,
    core: ServingCore,
) -> list[str]:
    bad: list[str] = []
    outside = base / "outside"
    if not (tree.responses / f"{control}.json").exists():
        bad.append("the control request was not answered: serving stopped")
    for line in errors:
        if "serving task failed" in line or "IllegalTransition" in line or "Traceback" in line:
            bad.append(f"error logged: {line[:600]}")
    # Links were never followed: nothing written outside, the sentinel intact.
    forged = log.ids("forge")
    through = sorted(p.name for p in (outside / "elsewhere").iterdir() if p.stem not in forged)
    if through:
        bad.append(f"written through a link: {through}")
    if not (outside / "secret.json").is_file():
        bad.append("a file outside the root was moved or removed through a link")
    # The session folder swapped for a link: nothing served, answered or beaten through it.
    bait = outside / "bait-session"
    through = sorted(p.name for p in (bait / "responses").iterdir() if p.stem not in forged)
    if through or any((bait / "serving").glob("*")):
        bad.append(f"written through a linked session folder: {through} {list((bait / 'serving').glob('*'))}")
    if not (bait / "requests" / "bait.json").is_file():
        bad.append("a request behind a linked session folder was moved or removed")
    behind = {p.stem for p in (bait / "requests").glob("*.json")}  # written through the link by a child
    by_name: dict[str, list[str]] = defaultdict(list)
    for event in events:
        by_name[event.key.name].append(event.kind)
    for name, kinds in by_name.items():
        if kinds.count("answered") > 1:
            bad.append(f"{name} answered twice: {kinds}")
    # Answered at most once per id: what the children consumed, the history's rows.
    for rid, reads in log.consumed.items():
        if len(reads) > 1 and rid not in forged:
            bad.append(f"{rid}: the child read {len(reads)} responses: {reads}")
    with contextlib.closing(sqlite3.connect(store.path)) as db:  # the history's rows, as written
        rows = db.execute(
            "SELECT request_id, count(*) FROM asks WHERE written = 1 GROUP BY request_id HAVING count(*) > 1"
        ).fetchall()
    for rid, count in rows:
        bad.append(f"{rid}: {count} verdicts recorded as written")
    # Every response readable, every denial without a person explained.
    plain_rule_denials: list[str] = []
    for path in tree.responses.glob("*.json"):
        rid = path.stem
        data = path.read_bytes()
        if rid in forged:
            continue
        parsed = parse_response(data)
        if parsed is None:
            bad.append(f"{rid}: response not readable: {data[:200]!r}")
            continue
        decoded = json.loads(data)
        if (
            not decoded.get("approved")
            and decoded.get("state") != "denied"
            and not decoded.get("denialReason")
        ):
            bad.append(f"{rid}: denial without a reason: {data[:300]!r}")
        if decoded.get("state") == "denied" and (decoded.get("decidedBy") or {}).get("kind") != "user":
            plain_rule_denials.append(rid)
    if plain_rule_denials:  # finding R3 (tests/core/test_red_team.py, xfail): reported once
        bad.append(
            f"rule denial without a reason: {len(plain_rule_denials)} asks, e.g. {plain_rule_denials[0]}"
        )
    # A person's approval is on disk only for the ask the person saw.
    rewritten_ids = log.ids("rewrite")
    for name, state, raw in decided:
        if state == "approved":
            rid = name.removesuffix(".json")
            if rid in rewritten_ids:
                rewritten = json.loads(raw).get("value") == "rm -rf ~"
                if not rewritten and (tree.requests / name).exists():
                    bad.append(f"{rid}: approved while its file holds another ask")
    # Nothing lost: every request a child wrote and left in place was answered or set aside.
    quarantined = {Path(str(r.get("originalPath", ""))).name for r in core.quarantine.records()}
    # A recorded verdict published again after a failed write (`reconcile`) is marked written, not evented.
    with contextlib.closing(sqlite3.connect(store.path)) as db:
        written_rows = {rid for (rid,) in db.execute("SELECT request_id FROM asks WHERE written = 1")}
    withdrawn, consumed = log.ids("withdraw"), log.ids("consume")
    for rid in log.ids("write"):
        name = f"{rid}.json"
        if rid in withdrawn or rid in consumed or rid in behind:
            continue
        answered = (
            "answered" in by_name.get(name, []) or (tree.responses / name).exists() or rid in written_rows
        )
        if not answered and name not in quarantined:
            left = (tree.requests / name).exists()
            bad.append(f"{rid}: lost (events {by_name.get(name)}, request still there: {left})")
    # No response for a request withdrawn before any decision.
    for name, kinds in by_name.items():
        after = kinds[kinds.index("withdrawn") :] if "withdrawn" in kinds else []
        if "answered" in after and "arrived" not in after:  # a new file under the name is a new ask
            bad.append(f"{name}: answered after it was withdrawn: {kinds}")
    pending = (
        [
            n
            for n in os.listdir(base / "state" / "quarantine" / encode_session_id(S))
            if n.endswith(".pending.json")
        ]
        if (base / "state" / "quarantine").exists()
        else []
    )
    if pending:
        bad.append(f"quarantine reasons left pending after a clean stop: {pending}")
    return bad


# -- the kill -9 mode ------------------------------------------------------------------------------


def serve_command(root: Path, state: Path, rules: Path, project: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tui.cli",
        "serve",
        "--session",
        S,
        "--forwarding-root",
        str(root),
        "--state-dir",
        str(state),
        "--rules",
        str(rules),
        "--project",
        str(project),
        "--agent-dir",
        str(project / "agent"),
    ]


def kill_mode(seed: int, seconds: float, base: Path) -> list[str]:
    rng = seeded(seed)
    root, state, project = base / "root", base / "state", base / "project"
    for folder in (state, project / "agent"):
        folder.mkdir(parents=True)
    rules = base / "rules.json"
    rules.write_text(json.dumps(RULES))
    tree = Tree(root)
    tree.requests.mkdir(parents=True)
    env = dict(os.environ, HOME=str(base / "home"), PI_CODING_AGENT_DIR=str(project / "agent"))
    written: list[str] = []
    kills = 0
    end = time.monotonic() + seconds
    server: subprocess.Popen[bytes] | None = None
    logs = open(base / "serve.log", "ab")  # noqa: SIM115

    def start() -> subprocess.Popen[bytes]:
        command = serve_command(root, state, rules, project)
        here = Path(__file__).resolve().parents[1]
        return subprocess.Popen(command, env=env, stdout=logs, stderr=logs, cwd=here)

    try:
        while time.monotonic() < end:
            server = start()
            for _ in range(rng.randint(1, 6)):
                for _ in range(rng.randint(1, 150)):
                    rid = f"k{len(written)}"
                    tree.write(f"{rid}.json", json.dumps(body(rid, rng.choice(COMMANDS))).encode())
                    written.append(rid)
                time.sleep(rng.uniform(0, 0.3))
            server.send_signal(signal.SIGKILL)
            server.wait()
            kills += 1
        server = start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(tree.requests.glob("*.json")):
            time.sleep(0.1)
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    finally:
        if server is not None and server.poll() is None:
            server.kill()
        logs.close()
    bad: list[str] = []
    left = sorted(p.name for p in tree.requests.glob("*.json"))
    if left:
        bad.append(f"{len(left)} requests never answered: {left[:10]}")
    conn = sqlite3.connect(state / "history.sqlite3")
    recorded: dict[str, list[bytes]] = defaultdict(list)
    for rid, response in conn.execute("SELECT request_id, response FROM asks WHERE response IS NOT NULL"):
        recorded[rid].append(response)
    plain: list[str] = []
    for rid in written:
        path = tree.responses / f"{rid}.json"
        if not path.exists():
            bad.append(f"{rid}: no response")
            continue
        data = path.read_bytes()
        if len(recorded[rid]) != 1:
            bad.append(f"{rid}: {len(recorded[rid])} verdicts recorded")
        elif recorded[rid][0] != data:
            bad.append(f"{rid}: the response is not the recorded verdict: {data[:120]!r}")
        decoded = json.loads(data)
        if not decoded.get("approved") and not decoded.get("denialReason"):
            plain.append(rid)
    if plain:  # finding R3 (tests/core/test_red_team.py, xfail): reported once
        bad.append(f"rule denial without a reason: {len(plain)} asks, e.g. {plain[0]}")
    print(f"  seed {seed}: {len(written)} requests, {kills} kills -9", flush=True)
    return bad


def seeded(seed: int) -> random.Random:
    """The campaign's randomness: seeded, reproducible, never a secret."""
    return random.Random(seed)  # noqa: S311


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["inproc", "kill"])
    parser.add_argument("--seeds", default="1-3")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--children", type=int, default=6)
    parser.add_argument("--keep", action="store_true", help="keep the temp folders")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    failed = 0
    for seed in seeds(args.seeds):
        base = Path(tempfile.mkdtemp(prefix=f"red-{args.mode}-{seed}-"))
        started = time.monotonic()
        if args.mode == "inproc":
            bad = asyncio.run(inproc(seed, args.seconds, base, args.children))
        else:
            bad = kill_mode(seed, args.seconds, base)
        counts = Counter(line.split(":")[0] for line in bad)
        print(f"seed {seed}: {len(bad)} violations in {time.monotonic() - started:.1f}s ({base})", flush=True)
        for line in bad[:40]:
            print("   ", line)
        if bad:
            failed += 1
        elif not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        del counts
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
