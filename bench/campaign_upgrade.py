"""An older `serve` and this checkout's on one history file: the schema migrated under the older one's
writes (campaign4, issue 37's fifth pass: schema version 3, `asks_open`).

Run: `git -C /work/main archive 2bfce29 | tar -x -C /tmp/old` (a tree of the older version, run with
this checkout's interpreter), then `nice -n 10 uv run python -m bench.campaign_upgrade --old /tmp/old
[--asks 3000] [--dir /tmp]`.

Both serve `--on-ask leave` with `ls *` allowed and `rm *` denied (a third of the asks, `cat`, are left
open), on one state dir: the older serve answers a burst, then another while this checkout's serve of
a second session opens the same history (migrating it) and answers its own; both stop; a seventh of
the first session's left asks are withdrawn while nothing serves it; this checkout then serves the
first session (the restart's reconciliation) and answers one more burst. Checked: the file's version,
`PRAGMA integrity_check`, one row per ask, every decided ask's response the bytes of its row with
`written` 1, every left ask unanswered (the withdrawn ones ended, the others open and in `asks_open`),
and no ERROR or traceback in any log.

Campaign5 (`--refuse`, issue 37's sixth pass: schema version 4): at the end the older serve is started
once more on the migrated file and must refuse it cleanly (`HistoryTooNew`: a message, no traceback,
exit non-zero, serving nothing), leaving the file as it was (version, integrity, rows).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.campaign_common import request_bytes, session_dir, write_atomically

REPO = Path(__file__).resolve().parents[1]
KINDS = ("ls", "rm", "cat")


class Run:
    """One campaign's folders and the `serve` processes it starts."""

    def __init__(self, base: Path) -> None:
        self.base, self.root, self.state = base, base / "root", base / "state"
        self.rules = base / "rules.json"
        self.rules.write_text(json.dumps({"forwardingTimeoutMs": 600_000,
                                          "permission": {"bash": {"ls *": "allow", "rm *": "deny"}}}))

    def serve(self, checkout: Path, session: str, log: str) -> subprocess.Popen[bytes]:
        with open(self.base / log, "ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "tui.cli", "serve", "--session", session, "--forwarding-root",
                 str(self.root), "--state-dir", str(self.state), "--rules", str(self.rules),
                 "--on-ask", "leave", "--create"],
                cwd=checkout, stdout=out, stderr=subprocess.STDOUT,
            )

    def burst(self, session: str, prefix: str, count: int) -> dict[str, str]:
        """Request files written as a child writes them; each id's kind (`KINDS`)."""
        folder = session_dir(self.root, session) / "requests"
        folder.mkdir(parents=True, exist_ok=True)
        now, kinds = int(time.time() * 1000), {}
        for i in range(count):
            rid, kind = f"{prefix}-{i:05d}", KINDS[i % 3]
            write_atomically(folder, f"{rid}.json", request_bytes(rid, session, f"{kind} {rid}", now))
            kinds[rid] = kind
        return kinds

    def answered(self, session: str, kinds: dict[str, str]) -> bool:
        folder = session_dir(self.root, session) / "responses"
        have = set(os.listdir(folder)) if folder.exists() else set()
        return all((f"{rid}.json" in have) == (kind != "cat") for rid, kind in kinds.items())


def wait(predicate: Callable[[], bool], what: str, within: float = 180.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="a tree of the older version")
    parser.add_argument("--asks", type=int, default=3000, help="asks per burst (the second is twice)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--refuse", action="store_true",
                        help="campaign5: the older serve started again on the migrated file must refuse it")
    args = parser.parse_args()
    run = Run(Path(tempfile.mkdtemp(prefix="campaign-upgrade-", dir=args.dir)))
    print(f"campaign folder: {run.base}")
    db = run.state / "history.sqlite3"
    old = run.serve(args.old, "s-old", "old.log")
    first = run.burst("s-old", "a", args.asks)
    wait(lambda: run.answered("s-old", first), "the older serve's first burst")
    with sqlite3.connect(db) as conn:
        before = conn.execute("PRAGMA user_version").fetchone()[0]
    second = run.burst("s-old", "b", 2 * args.asks)  # written by the older serve while the file migrates
    time.sleep(0.3)
    new = run.serve(REPO, "s-new", "new.log")
    third = run.burst("s-new", "c", args.asks)
    wait(lambda: run.answered("s-old", second), "the older serve's second burst")
    wait(lambda: run.answered("s-new", third), "this checkout's burst")
    stop(old)
    stop(new)
    left = [rid for rid, kind in {**first, **second}.items() if kind == "cat"]
    gone = set(left[::7])
    for rid in gone:
        os.unlink(session_dir(run.root, "s-old") / "requests" / f"{rid}.json")
    again = run.serve(REPO, "s-old", "again.log")
    fourth = run.burst("s-old", "d", args.asks // 2)
    wait(lambda: run.answered("s-old", fourth), "this checkout serving the older session")
    stop(again)
    problems = check(run, db, gone, {"s-old": {**first, **second, **fourth}, "s-new": third})
    with sqlite3.connect(db) as conn:
        after = conn.execute("PRAGMA user_version").fetchone()[0]
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        indexed = conn.execute("SELECT COUNT(*) FROM asks INDEXED BY asks_open "
                               "WHERE verdict IS NULL AND ended_at IS NULL").fetchone()[0]
    errors = {log: sum("ERROR" in line or "Traceback" in line
                       for line in (run.base / log).read_text(errors="replace").splitlines())
              for log in ("old.log", "new.log", "again.log")}
    if args.refuse:
        problems += refused(run, args.old, db, after)
    asks = len(first) + len(second) + len(third) + len(fourth)
    print(f"asks {asks}; history version {before} -> {after}; integrity {integrity}; open rows in "
          f"asks_open {indexed}; left asks withdrawn while stopped {len(gone)}; ERROR lines {errors}")
    print(f"problems: {len(problems)}")
    for line in problems[:20]:
        print(f"  {line}")
    return 1 if problems or integrity != "ok" or any(errors.values()) else 0


def refused(run: Run, old: Path, db: Path, version: int) -> list[str]:
    """The older serve on the migrated file: it must stop at once, saying why, and change nothing."""
    def shape() -> tuple[object, ...]:
        with sqlite3.connect(db) as conn:
            return (conn.execute("PRAGMA user_version").fetchone()[0],
                    conn.execute("PRAGMA integrity_check").fetchone()[0],
                    conn.execute("SELECT COUNT(*), MAX(id) FROM asks").fetchone())
    before = shape()
    kinds = run.burst("s-old", "e", 30)  # what it must not answer
    process = run.serve(old, "s-old", "refused.log")
    try:
        code = process.wait(120)
    except subprocess.TimeoutExpired:
        process.kill()
        return ["the older serve did not stop on a newer history"]
    text = (run.base / "refused.log").read_text(errors="replace")
    print(f"the older serve on version {version}: exit {code}; its log: {text.strip()[-300:]!r}")
    problems = []
    if code == 0 or "newer than this program" not in text or "Traceback" in text:
        problems.append(f"the older serve's refusal: exit {code}, {text[-500:]!r}")
    folder = session_dir(run.root, "s-old") / "responses"
    answered = [rid for rid in kinds if (folder / f"{rid}.json").exists()]
    if answered:
        problems.append(f"the older serve answered {len(answered)} asks on a newer history")
    if shape() != before:
        problems.append(f"the file changed under the refusing serve: {before} -> {shape()}")
    return problems


def check(run: Run, db: Path, gone: set[str], sessions: dict[str, dict[str, str]]) -> list[str]:
    """Every ask against its one row and its response file."""
    rows: dict[str, list[tuple[str, str | None, int | None, float | None, bytes | None]]] = {}
    with sqlite3.connect(db) as conn:
        for rid, outcome, verdict, written, ended, response in conn.execute(
                "SELECT request_id, outcome, verdict, written, ended_at, response FROM asks"):
            rows.setdefault(rid, []).append((outcome, verdict, written, ended, response))
    problems: list[str] = []
    for session, kinds in sessions.items():
        folder = session_dir(run.root, session) / "responses"
        for rid, kind in kinds.items():
            found = rows.get(rid, [])
            if len(found) != 1:
                problems.append(f"{rid}: {len(found)} rows")
                continue
            outcome, verdict, written, ended, response = found[0]
            path = folder / f"{rid}.json"
            if kind == "cat":
                if path.exists() or verdict is not None:
                    problems.append(f"{rid}: a left ask answered")
                elif (ended is not None) != (rid in gone):
                    problems.append(f"{rid}: {outcome}, ended {ended}, withdrawn {rid in gone}")
            elif not path.exists() or path.read_bytes() != bytes(response or b"") or written != 1:
                problems.append(f"{rid}: its response is not its row's written bytes ({outcome}, {written})")
    return problems


if __name__ == "__main__":
    sys.exit(main())
