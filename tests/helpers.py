"""Shared test helpers: write requests the way a pi child does, wait for real files."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core import platform
from core.clock import SYSTEM_CLOCK, Clock
from core.courier.transport import Hop, Parcel
from core.disk.paths import encode_session_id
from core.disk.writer import DISK, DiskWriter
from core.history import HistoryStore
from core.person import DecisionRefused, Person
from core.seams import FaultHook, Seams, no_fault
from core.serving import ServingCore
from core.serving.loop import SAFETY_RESCAN_S
from core.serving.verdicts import Ledger
from core.testing import Breakable, ManualClock
from core.vocabulary.asks import Arbiter
from core.vocabulary.events import ServeEvent
from tests.history.support import S, intent
from tui.demo.nats_server import NatsServer as NatsServer
from tui.demo.nats_server import free_port as free_port
from tui.demo.nats_server import nats_server_binary as nats_server_binary

needs_inotify = pytest.mark.skipif(
    platform.watch_backend() != "inotify",
    reason="woken by inotify events (where there are none, e.g. PI_AUTHORIZER_PORTABLE=1, the listing "
    "watcher waits on the clock)",
)
needs_anonymous_files = pytest.mark.skipif(
    not platform.anonymous_files(),
    reason="no O_TMPFILE or no /proc linking here (e.g. PI_AUTHORIZER_PORTABLE=1)",
)
needs_proc = pytest.mark.skipif(not platform.LINUX, reason="a zombie is told apart only by Linux's /proc")

CHILD_SESSION = "019ff96a-1111-7000-8000-aaaaaaaaaaaa"


def request_body(request_id: str, target: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": request_id,
        "createdAt": time.time_ns() // 1_000_000,
        "requesterSessionId": CHILD_SESSION,
        "targetSessionId": target,
        "requesterAgentName": "Explore",
        "message": f"Agent 'Explore' requested bash command 'ls {request_id}'. Allow this command?",
        "source": "tool_call",
        "surface": "bash",
        "value": f"ls {request_id}",
    }
    body.update(fields)
    return body


def session_dir(root: Path, session_id: str) -> Path:
    return root / "sessions" / encode_session_id(session_id)


def write_request_bytes(root: Path, session_id: str, name: str, data: bytes) -> Path:
    """Atomic temp+rename into `requests/`, as the child does (mkdir -p first)."""
    requests = session_dir(root, session_id) / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    (session_dir(root, session_id) / "responses").mkdir(exist_ok=True)
    target = requests / name
    temp = requests / f"{name}.{os.getpid()}.{time.time_ns()}.tmp"
    temp.write_bytes(data)
    temp.rename(target)
    return target


def write_request(root: Path, session_id: str, request_id: str, **fields: Any) -> Path:
    body = request_body(request_id, session_id, **fields)
    return write_request_bytes(root, session_id, f"{request_id}.json", json.dumps(body).encode())


def response_path(root: Path, session_id: str, request_id: str) -> Path:
    return session_dir(root, session_id) / "responses" / f"{request_id}.json"


def poll_until(predicate: Callable[[], bool], within: float = 30.0, what: str = "condition") -> None:
    """Blocking twin of `wait_for` for tests that drive subprocesses; `within` is only a hang guard."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        time.sleep(0.01)


def readable(fd: int, timeout_ms: int) -> bool:
    """Whether `fd` has something to read within `timeout_ms`: poll, which takes any descriptor number
    (select refuses those past 1,023, and a busy test worker may hold that many)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_ms))

async def wait_for_async(
    predicate: Callable[[], Awaitable[bool]], within: float = 30.0, what: str = "condition"
) -> None:
    """`wait_for` for a condition read asynchronously (from a broker, say); `within` is a hang guard."""
    deadline = time.monotonic() + within
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.005)


async def wait_for(predicate: Callable[[], bool], within: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.005)


async def rescanned_until(
    clock: ManualClock, predicate: Callable[[], bool], within: float = 30.0, what: str = "condition"
) -> None:
    """Drive a core's safety rescans on `clock` (one interval per poll) until `predicate` holds: for
    what no file event announces (a disk that healed, a folder made sound again)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        clock.advance(SAFETY_RESCAN_S)
        await asyncio.sleep(0.005)


async def read_response_when_written(
    root: Path, session_id: str, request_id: str, within: float = 30.0
) -> dict[str, Any]:
    path = response_path(root, session_id, request_id)
    await wait_for(path.exists, within, what=f"response {path}")
    body: dict[str, Any] = json.loads(path.read_bytes())
    return body


async def read_response_when_done(
    root: Path, session_id: str, request_id: str, within: float = 30.0
) -> dict[str, Any]:
    """The response once serving is done with the ask: the request is removed AFTER the response is
    published, so a test that then changes the inbox waits for both or races the server's unlink."""
    body = await read_response_when_written(root, session_id, request_id, within)
    request = session_dir(root, session_id) / "requests" / f"{request_id}.json"
    await wait_for(lambda: not request.exists(), within, what=f"{request} removed")
    return body


class Served:
    """A bare serving core on `tmp_path` serving session `S`, its events kept; a failed write is retried
    at once.

    Its seams: `clock`, `writer` (the disk) and `fault`, each a fake of `core.testing` when given, and
    `booted_at` (when the machine started: a power cut is one start).

    Bare on purpose, not built by `core.wiring`: its users test the serving core's own handling of
    faults (disks, ledgers, the quarantine, intake, the person's queue), and
    - they pass any `Ledger`, most often a fake wrapping a store (`FailingLedger`, `PoisonLedger`),
      where `core.wiring` takes a `HistoryStore` and also subscribes it and reconciles it when a
      session is taken: more history writes, under a fault meant for the one being tested;
    - the asks they write carry no facts, so a recorded authority would never judge one; all it would
      add is its config watcher, waiting on the test's clock beside the waits under test.
    Tests of a whole node build it with `core.wiring` (`tests/core/test_wiring.py`, `tests/tui`)."""

    def __init__(
        self,
        tmp_path: Path,
        arbiter: Arbiter,
        ledger: Ledger | None = None,
        clock: Clock = SYSTEM_CLOCK,
        writer: DiskWriter = DISK,
        fault: FaultHook = no_fault,
        booted_at: Callable[[], float | None] = platform.booted_at,
    ) -> None:
        self.root, self.state = tmp_path / "root", tmp_path / "state"
        self.events: list[ServeEvent] = []
        seams = Seams(clock=clock, disk=writer, fault=fault, retry_delays=(0.0, 0.0, 0.0),
                      booted_at=booted_at)
        self.core = ServingCore(self.root, self.state, arbiter, ledger=ledger, seams=seams)
        self.core.subscribe(self.events.append)

    async def __aenter__(self) -> Served:
        self.core.add_session(S)
        self.task = asyncio.create_task(self.core.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.core.stop()
        await asyncio.wait_for(self.task, 10)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def stop_serve(serve: subprocess.Popen[bytes]) -> None:
    """A `serve` process asked to stop (SIGTERM), killed if it has not within 20 s."""
    if serve.poll() is None:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(20)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()


def namespace_refused() -> str | None:
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs in a private mount namespace"
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"unshare -m is not permitted here: {probe.stderr.decode(errors='replace').strip()}"
    return None


@contextlib.contextmanager
def small_tmpfs(tmp: Path, size: str) -> Iterator[Path]:
    """In a child of `in_private_mounts`: a tmpfs of `size` (`1m`) at `tmp/fs`, a real disk that fills
    up (`fill`), unmounted after."""
    fs = tmp / "fs"
    fs.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(fs)], check=True)
    try:
        yield fs
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False)


def in_private_mounts(child: list[str], timeout: float, context: Callable[[], str] = lambda: "") -> Any:
    """Run `python <child...>` as root in a private mount namespace (where it may mount a small tmpfs
    and fill it) from the repository; the JSON of the last line it prints. Skips the test where such
    a namespace cannot be made; `context`: what else to show when the child fails."""
    refused = namespace_refused()
    if refused is not None:
        pytest.skip(refused)
    repo = Path(__file__).resolve().parents[1]
    command = ["unshare", "-m", "--propagation", "private", sys.executable, *child]
    done = subprocess.run(command, cwd=repo, capture_output=True, timeout=timeout, check=False)
    lines = done.stdout.decode().strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr.decode(errors="replace")[-3000:] + context()
    return json.loads(lines[-1])

def fill(folder: Path) -> Path:
    """A filler file grown until the filesystem refuses (ENOSPC)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"x" * 4096)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    return filler


def broker_parcel(parcel_id: str, *, host: str = "host-a", session: str = "sess-1",
                  ttl_s: float = 60.0, **fields: Any) -> Parcel:
    """A parcel as a courier on `host` carries a child's request (its bytes exactly as written)."""
    body = request_body(parcel_id, session, **fields)
    return Parcel(
        parcel_id=parcel_id,
        request=json.dumps(body).encode("utf-8"),
        hops=(Hop(host=host, session_id=session, node=f"courier-{host}"),),
        deadline_ms=time.time() * 1000 + ttl_s * 1000,
    )


@contextlib.contextmanager
def unrun(core: ServingCore) -> Iterator[ServingCore]:
    """A core whose parts a test calls directly and never runs: its locks, heartbeats and folder
    descriptors released after the block, as the end of `run` releases them. A property test builds
    hundreds; left open, they took a worker past select()'s 1,024 descriptors."""
    try:
        yield core
    finally:
        core.served.release()
        core.tree.close()
        core.state_tree.close()


@contextlib.asynccontextmanager
async def serving_session(core: ServingCore, session: str) -> AsyncIterator[None]:
    """A node's core serving `session` for the block (whole nodes built by `core.wiring`)."""
    core.add_session(session)
    task = asyncio.create_task(core.run())
    try:
        yield
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)


def bash_intent(command: str) -> dict[str, object]:
    """The facts a child sends for a bash `command`."""
    return {"surface": "bash", "matchValues": [command], "boundaryValue": None, "requesterCwd": "/repo",
            "principal": {"sessionId": "child", "agentName": "Explore"}}


async def serve_until_the_fail_safe(
    root: Path, store: HistoryStore, fault: Breakable
) -> DecisionRefused | None:
    """A person approves an ask while the history is broken (`fault`): the child is denied for safety
    (a gate error) and the row is closed `fail-safe`. Returns what the person's decision was told."""
    person = Person()
    seams = Seams(retry_delays=(0.0, 0.0, 0.0))
    core = ServingCore(root, store.path.parent, person, ledger=store, seams=seams)
    core.subscribe(store.observe)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    refused = None
    try:
        write_request(root, S, "p", accessIntent=intent("bash", "make test"))
        await wait_for(lambda: bool(person.pending()), what="pending ask")
        await wait_for(lambda: [r.outcome for r in store.query()] == ["pending"], what="arrival row")
        fault.broken = True
        try:
            await person.approve_once(person.pending()[0].key)
        except DecisionRefused as exc:
            refused = exc
        assert (await read_response_when_written(root, S, "p"))["decidedBy"]["kind"] == "gate_error"
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
    return refused


@contextlib.contextmanager
def deep_tree(top: Path, depth: int) -> Iterator[Path]:
    """`top` and `depth - 1` folders below it, one file at the bottom (made by descriptor: a path
    1,000 levels long is longer than the kernel takes); removed afterwards if still there, without
    recursion (pytest's own cleanup of old temp dirs recurses, and would fail on it)."""
    from core.disk.entries import remove_tree
    try:
        _make_deep_tree(top, depth)
        yield top
    finally:
        with contextlib.suppress(FileNotFoundError):
            parent = os.open(top.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                remove_tree(parent, top.name)
            finally:
                os.close(parent)


def _make_deep_tree(top: Path, depth: int) -> None:
    top.parent.mkdir(parents=True, exist_ok=True)
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth - 1):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(os.open("bottom", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    os.close(fd)
