"""Cost of walking the session tree by descriptor: list, read, answer and delete N requests in one inbox.

    uv run python -m bench.bench_tree [N]

Every inbox operation opens `sessions/<id>/{requests,responses}` from the root one component at a
time (`core.disk.tree`); this measures what that costs per request against the same work done by path.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from core.disk.tree import FILE_MODE
from core.forwarding.inbox import SessionInbox


def by_descriptor(root: Path, count: int) -> float:
    inbox = SessionInbox(root, "bench")
    start = time.perf_counter()
    for name in inbox.list_request_names():
        inbox.read_request(name)
        stem = name.removesuffix(".json")
        if not inbox.has_response(stem):
            inbox.write_response(stem, b"{}")
        inbox.delete_request(name)
    return time.perf_counter() - start


def by_path(root: Path, count: int) -> float:
    """The same syscalls' payload by path string (what the code did before `core.disk.tree`)."""
    requests = root / "sessions" / "bench" / "requests"
    responses = root / "sessions" / "bench" / "responses"
    start = time.perf_counter()
    for name in sorted(n for n in os.listdir(requests) if n.endswith(".json")):
        fd = os.open(requests / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        os.read(fd, 1 << 20)
        os.close(fd)
        target = responses / name
        if not os.path.lexists(target):
            responses.mkdir(mode=0o700, parents=True, exist_ok=True)
            temp = target.with_name(name + ".tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
            os.write(fd, b"{}")
            os.fsync(fd)
            os.close(fd)
            os.link(temp, target, follow_symlinks=False)
            dfd = os.open(responses, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(dfd)
            os.close(dfd)
            temp.unlink()
        (requests / name).unlink()
    return time.perf_counter() - start


def fill(root: Path, count: int) -> None:
    requests = root / "sessions" / "bench" / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (requests / f"r{index:06d}.json").write_bytes(b'{"id":"x"}')


def lookups(root: Path, count: int) -> tuple[float, float]:
    """The walk alone: `has_response` by descriptor against `os.path.lexists` by path."""
    inbox = SessionInbox(root, "bench")
    inbox.write_response("probe", b"{}")
    start = time.perf_counter()
    for _ in range(count):
        inbox.has_response("probe")
    walked = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(count):
        os.path.lexists(inbox.response_path("probe"))
    return walked, time.perf_counter() - start


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000
    for label, run in (("by path", by_path), ("by descriptor", by_descriptor)):
        with tempfile.TemporaryDirectory() as tmp:
            fill(Path(tmp), count)
            took = run(Path(tmp), count)
        print(f"{label:>14}: {count} requests in {took:.3f} s = {took / count * 1e6:.0f} us per request"
              " (list, read, answer with two fsyncs, delete)")
    with tempfile.TemporaryDirectory() as tmp:
        walked, by_string = lookups(Path(tmp), 100_000)
    print(f"one lookup: {walked * 10:.1f} us by descriptor walk, {by_string * 10:.1f} us by path string")


if __name__ == "__main__":
    main()
