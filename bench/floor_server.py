"""The floor: the minimal durable server, one thread, the same protocol with this project's
guarantees and nothing else (raced by `bench.bench_race` beside the reference and `serve`).

Run: `python -m bench.floor_server ROOT SESSION_ID STATE_DIR` (prints `ready`, serves until SIGTERM).

What it keeps of pi-authorizer's guarantees, per batch of up to 1,024 requests listed at once:
every request read through the folder's descriptor without following a link, decoded (`json`),
checked to be an object naming its own id, and judged by one rule (a bash ask whose first match
value starts with `git ` is allowed, anything else denied with a reason: the fail-safe); the whole
batch's history rows (the request's bytes, the verdict, the response's bytes) committed in one
`synchronous=FULL` transaction **before** any response is visible; each response written into an
anonymous file (`O_TMPFILE`) and linked as `responses/<id>.json` (`linkat`: an existing response is
never replaced), then `responses/` fsynced once; then the requests removed. A response's bytes need
no flush of their own: the history holds them (`docs/reliability.md`). Woken by inotify on
`requests/`, events read in bulk. No log line, no event, no second thread, no validation beyond the
above: the cost any server in this interpreter pays for these guarantees.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import sqlite3
import sys
import time
from pathlib import Path

from core.disk.paths import encode_session_id
from core.forwarding.inotify import IN_CLOSE_WRITE, IN_MOVED_TO, IN_ONLYDIR, Inotify

BATCH = 1024
READ_LIMIT = 1 << 20
FIRST_READ = 1 << 16
DENIAL = "no rule allows this ask and no person is asked (the floor server's fail-safe)"


def read_all(fd: int) -> bytes:
    """Up to `READ_LIMIT` bytes, read in `FIRST_READ` first: a 1 MiB buffer per read would cost every
    ask an `mmap`, `mremap` and `munmap` (Python allocates the whole buffer, then shrinks it)."""
    raw = os.read(fd, FIRST_READ)
    if len(raw) < FIRST_READ:
        return raw
    parts, held = [raw], len(raw)
    while held < READ_LIMIT and (more := os.read(fd, min(READ_LIMIT - held, FIRST_READ))):
        parts.append(more)
        held += len(more)
    return b"".join(parts)


def verdict(body: object, name: str, session: str) -> tuple[str, bytes]:
    """(state, response bytes) for one decoded request."""
    now = time.time_ns() // 1_000_000
    intent = body.get("accessIntent") if isinstance(body, dict) else None
    values = intent.get("matchValues") if isinstance(intent, dict) else None
    if (isinstance(body, dict) and body.get("id") == name and isinstance(intent, dict)
            and intent.get("surface") == "bash" and isinstance(values, list) and values
            and isinstance(values[0], str) and values[0].startswith("git ")):
        response = {"approved": True, "state": "approved", "responderSessionId": session,
                    "respondedAt": now, "decidedBy": {"kind": "rules", "surface": "bash"}}
    else:
        response = {"approved": False, "state": "denied_with_reason", "denialReason": DENIAL,
                    "responderSessionId": session, "respondedAt": now}
    return str(response["state"]), json.dumps(response, separators=(",", ":")).encode()


class Floor:
    def __init__(self, session_dir: Path, session: str, state: Path) -> None:
        self.session = session
        self.requests = os.open(session_dir / "requests", os.O_RDONLY | os.O_DIRECTORY)
        self.responses = os.open(session_dir / "responses", os.O_RDONLY | os.O_DIRECTORY)
        state.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(state / "floor.sqlite3", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS asks (request_id TEXT, session_id TEXT, arrived_at REAL,"
                        " verdict TEXT, request BLOB, response BLOB)")

    def pending(self) -> list[str]:
        names = [n for n in os.listdir(self.requests) if n.endswith(".json") and not n.startswith(".")]
        names.sort()
        return names

    def serve_batch(self, names: list[str]) -> None:
        rows = []
        answers = []
        for name in names:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.requests)
            except FileNotFoundError:
                continue
            try:
                raw = read_all(fd)
            finally:
                os.close(fd)
            rid = name.removesuffix(".json")
            try:
                body: object = json.loads(raw)
            except ValueError:
                body = None
            state, response = verdict(body, rid, self.session)
            rows.append((rid, self.session, time.time(), state, raw, response))
            answers.append((name, response))
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO asks VALUES (?, ?, ?, ?, ?, ?)", rows)
        self.db.execute("COMMIT")  # recorded before visible
        for name, response in answers:
            fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600, dir_fd=self.responses)
            try:
                os.write(fd, response)
                with contextlib.suppress(FileExistsError):  # answered already: never replaced
                    os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=self.responses)
            finally:
                os.close(fd)
        os.fsync(self.responses)
        for name, _ in answers:
            try:
                os.unlink(name, dir_fd=self.requests)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    raise

    def drain(self) -> None:
        while names := self.pending():
            for start in range(0, len(names), BATCH):
                self.serve_batch(names[start:start + BATCH])


def main() -> None:
    root, session, state = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    session_dir = root / "sessions" / encode_session_id(session)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    watch = Inotify()
    watch.add_watch(str(session_dir / "requests"), IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR)
    floor = Floor(session_dir, session, state)
    floor.drain()
    os.write(1, b"ready\n")
    while True:
        select.select([watch.fd], [], [])
        watch.read_events()
        floor.drain()


if __name__ == "__main__":
    main()
