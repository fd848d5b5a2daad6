"""The floor: what CPython pays per ask for the steps no server can skip, one thread, nothing else.

Run: `uv run python -m bench.bench_floor [--asks N] [--dir DIR]` (DIR: where the files go; default
`TMPDIR`).

Each step over N request files written beforehand (the bench's request with facts), timed alone,
CPU µs per ask: open/fstat/read/close of the request, `json.loads`, encoding a response, an
anonymous file written and linked as the response (`O_TMPFILE` + `linkat`; a named temp + rename
where the filesystem has no anonymous files), the request's `unlink`, and one row per ask into SQLite
(`executemany`, 1,024 a transaction, WAL, `synchronous=FULL`). No validation, no judging, no log line,
no event: the sum is what a server in this interpreter cannot go below, to set beside the reference's
whole cost per ask (`bench.bench_race` prints the contenders' CPU per ask).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.bench_race import with_facts

BATCH = 1024


def timed(label: str, count: int, step: Callable[[], None]) -> float:
    """CPU µs per ask of `step` (which handles all `count` asks)."""
    started = time.process_time()
    step()
    per_ask = (time.process_time() - started) / count * 1e6
    print(f"  {label:<40} {per_ask:6.1f} µs")
    return per_ask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--asks", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (default: TMPDIR)")
    args = parser.parse_args()
    count: int = args.asks
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        requests, responses = Path(tmp) / "requests", Path(tmp) / "responses"
        requests.mkdir()
        responses.mkdir()
        names = [f"floor-{i:07d}.json" for i in range(count)]
        for name in names:
            (requests / name).write_bytes(json.dumps(with_facts(name.removesuffix(".json"))).encode())
        req_fd = os.open(requests, os.O_RDONLY | os.O_DIRECTORY)
        res_fd = os.open(responses, os.O_RDONLY | os.O_DIRECTORY)
        raws: list[bytes] = []
        bodies: list[dict[str, object]] = []
        encoded: list[bytes] = []

        def read() -> None:
            for name in names:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=req_fd)
                os.fstat(fd)
                raws.append(os.read(fd, 1 << 20))
                os.close(fd)

        def decode() -> None:
            bodies.extend(json.loads(raw) for raw in raws)

        def encode() -> None:
            encoded.extend(
                json.dumps({"approved": True, "state": "approved", "responderSessionId": "s",
                            "respondedAt": 1, "decidedBy": {"kind": "rules", "surface": "bash"}},
                           separators=(",", ":")).encode()
                for _ in bodies)

        def write() -> None:
            anonymous = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")
            for name, body in zip(names, encoded, strict=True):
                if anonymous:
                    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600, dir_fd=res_fd)
                    os.write(fd, body)
                    os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=res_fd)
                else:
                    fd = os.open(f"{name}.tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600, dir_fd=res_fd)
                    os.write(fd, body)
                    os.rename(f"{name}.tmp", name, src_dir_fd=res_fd, dst_dir_fd=res_fd)
                os.close(fd)

        def remove() -> None:
            for name in names:
                os.unlink(name, dir_fd=req_fd)

        conn = sqlite3.connect(Path(tmp) / "floor.sqlite3", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE asks (request_id TEXT, arrived_at REAL, verdict TEXT, facts TEXT, "
                     "response BLOB, raw BLOB)")

        def record() -> None:
            asks = list(zip(names, bodies, encoded, raws, strict=True))
            for start in range(0, count, BATCH):
                rows = [(name, time.time(), "approved", json.dumps(body.get("accessIntent")), out, raw)
                        for name, body, out, raw in asks[start:start + BATCH]]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO asks VALUES (?, ?, ?, ?, ?, ?)", rows)
                conn.execute("COMMIT")

        print(f"{count:,} asks in {tmp}, CPU per ask:")
        total = sum((
            timed("read the request", count, read),
            timed("json.loads", count, decode),
            timed("encode the response", count, encode),
            timed("write and link the response", count, write),
            timed("unlink the request", count, remove),
            timed("one history row (executemany)", count, record),
        ))
        print(f"  {'the floor':<40} {total:6.1f} µs ({1e6 / total:,.0f} asks/s on one core)")
        conn.close()
        os.close(req_fd)
        os.close(res_fd)


if __name__ == "__main__":
    main()
