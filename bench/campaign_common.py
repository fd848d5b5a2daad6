"""What both campaigns (issues 32/33) share: real `pi-authorizer serve` processes under signals, a
simulated pi child writing request files and reading its answers, and the history databases read
after the run to be compared with what every child read.

Not a test: the campaigns are run by hand (`bench/campaign_broker.py`, `bench/campaign_serve_kill.py`)
and print what they found; the findings are then reduced to deterministic tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.disk.paths import encode_session_id
from core.forwarding.inotify import IN_Q_OVERFLOW, Inotify

REPO = Path(__file__).resolve().parents[1]

#: What a simulated child writes (the facts a pi 20.7.3 child sends for a bash command).
def request_bytes(request_id: str, target: str, command: str, created_ms: int) -> bytes:
    body = {
        "id": request_id,
        "createdAt": created_ms,
        "requesterSessionId": "campaign-child",
        "targetSessionId": target,
        "requesterAgentName": "Explore",
        "message": f"Agent 'Explore' requested bash command '{command}'. Allow this command?",
        "source": "tool_call",
        "surface": "bash",
        "value": command,
        "accessIntent": {"surface": "bash", "matchValues": [command], "boundaryValue": None,
                         "requesterCwd": "/work/campaign",
                         "principal": {"sessionId": "campaign-child", "agentName": "Explore"}},
    }
    return json.dumps(body).encode()


def session_dir(root: Path, session: str) -> Path:
    return root / "sessions" / encode_session_id(session)


def write_atomically(folder: Path, name: str, data: bytes) -> None:
    """Temp file and rename, as the child writes its request."""
    temp = folder / f".{name}.{os.getpid()}.{time.time_ns()}.tmp"
    temp.write_bytes(data)
    temp.rename(folder / name)


@dataclass
class ChildAsk:
    """One ask as its child saw it: what it wrote and what it read (None: nothing before its deadline)."""

    session: str
    request_id: str
    command: str
    sent_at: float
    deadline: float
    read: bytes | None = None
    read_at: float | None = None
    timed_out: bool = False

    def read_verdict(self) -> str:
        if self.read is None:
            return "none"
        try:
            approved = json.loads(self.read).get("approved")
        except ValueError:
            return "garbage"
        return "approved" if approved is True else "denied"


@dataclass
class Child:
    """A pi child of one served session: writes asks, polls its responses folder, and, as the child
    does, deletes request and response once read, or its request at its deadline."""

    root: Path
    session: str
    timeout_s: float
    asks: dict[str, ChildAsk] = field(default_factory=dict)
    open: dict[str, ChildAsk] = field(default_factory=dict)
    #: Response files that appeared for an ask already read or given up on (answered twice/late).
    stray: dict[str, list[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.requests = session_dir(self.root, self.session) / "requests"
        self.responses = session_dir(self.root, self.session) / "responses"
        self.requests.mkdir(parents=True, exist_ok=True)
        self.responses.mkdir(parents=True, exist_ok=True)

    def ask(self, request_id: str, command: str) -> None:
        now = time.time()
        data = request_bytes(request_id, self.session, command, int(now * 1000))
        write_atomically(self.requests, f"{request_id}.json", data)
        ask = ChildAsk(self.session, request_id, command, now, now + self.timeout_s)
        self.asks[request_id] = ask
        self.open[request_id] = ask

    def poll(self) -> None:
        try:
            names = os.listdir(self.responses)
        except OSError:
            return
        now = time.time()
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            rid = name[:-5]
            path = self.responses / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            ask = self.open.pop(rid, None)
            if ask is not None:
                ask.read, ask.read_at = data, now
                _unlink(self.requests / name)
            else:
                self.stray.setdefault(rid, []).append(data)
            _unlink(path)
        for rid, ask in list(self.open.items()):
            if now >= ask.deadline:
                ask.timed_out = True
                del self.open[rid]
                _unlink(self.requests / f"{rid}.json")


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


#: Every node a campaign made, stopped by `stop_all` whatever ends the run (Ctrl-C, a failure).
STARTED: list[Node] = []


def stop_all() -> None:
    for node in STARTED:
        with contextlib.suppress(Exception):
            node.stop()


class Node:
    """One `pi-authorizer serve` process (restartable with the same arguments), its log appended."""

    def __init__(self, name: str, folder: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        STARTED.append(self)
        self.name = name
        self.folder = folder
        self.args = args
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None
        self.stopped = False
        self.log = folder / f"{name}.log"
        self.starts = 0

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                ["nice", "-n", "10", sys.executable, "-m", "tui.cli", *self.args], cwd=REPO,
                stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.starts += 1
        self.stopped = False

    def pid(self) -> int | None:
        return None if self.process is None or self.process.poll() is not None else self.process.pid

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self.stopped = False

    def pause(self) -> None:
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGSTOP)
            self.stopped = True

    def resume(self) -> None:
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        self.stopped = False

    def stop(self) -> None:
        """SIGCONT then SIGTERM, a clean stop (SIGKILL if it does not end)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)


def wait_for_log(node: Node, text: str, within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if node.log.exists() and text in node.log.read_text(errors="replace"):
            return
        if node.process is not None and node.process.poll() is not None:
            raise RuntimeError(f"{node.name} ended: {node.log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    tail = node.log.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"{node.name}: no {text!r} within {within}s: {tail}")


def history_rows(state_dir: Path) -> list[dict[str, Any]]:
    """Every row of a node's history (`<state>/history.sqlite3`), read-only, as dicts."""
    path = state_dir / "history.sqlite3"
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute("SELECT * FROM asks ORDER BY id")]
    finally:
        conn.close()


def rows_by_request(state_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """`history_rows`, grouped by the request id their file names."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for row in history_rows(state_dir):
        by_id.setdefault(row["request_name"].removesuffix(".json"), []).append(row)
    return by_id


def serve_beating(root: Path, session: str, proc: subprocess.Popen[bytes], log_path: Path,
                  within: float = 60.0) -> None:
    """Wait for `serve`'s heartbeat of `session`; one that died or never beat is killed, and raises with
    its log's tail."""
    beat = root / "serving" / f"{encode_session_id(session)}.json"
    deadline = time.monotonic() + within
    while not beat.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"serve did not start: {log_path.read_text()[-2000:]}")
        time.sleep(0.05)


def responses_appeared(ino: Inotify, appeared: Counter[str]) -> bool:
    """Count each response named in the events waiting a moment on `ino` (a watch of `responses/`),
    by request id, in `appeared`; whether the kernel's queue overflowed meanwhile."""
    ready, _, _ = select.select([ino.fd], [], [], 0.02)
    overflowed = False
    if ready:
        for event in ino.read_events():
            if event.mask & IN_Q_OVERFLOW:
                overflowed = True
            elif event.name.endswith(".json") and not event.name.startswith("."):
                appeared[event.name[:-5]] += 1
    return overflowed


def response_verdict(body: bytes | None) -> str | None:
    if body is None:
        return None
    try:
        approved = json.loads(body).get("approved")
    except (ValueError, AttributeError):
        return "garbage"
    return "approved" if approved is True else "denied"


def count_log(node_logs: list[Path], text: str) -> int:
    return sum(p.read_text(errors="replace").count(text) for p in node_logs if p.exists())


def dump_asks(folder: Path, children: list[Child]) -> None:
    """What every child wrote and read (`asks.json`), to compare again with the histories by hand."""
    out = {rid: {"session": a.session, "command": a.command, "sent_at": a.sent_at, "read_at": a.read_at,
                 "read": None if a.read is None else a.read.decode("utf-8", "replace"),
                 "timed_out": a.timed_out}
           for child in children for rid, a in child.asks.items()}
    (folder / "asks.json").write_text(json.dumps(out, indent=0))
    stray = {rid: [d.decode("utf-8", "replace") for d in extra]
             for child in children for rid, extra in child.stray.items()}
    (folder / "stray.json").write_text(json.dumps(stray, indent=0))


def load_children(folder: Path, root_of: dict[str, Path], timeout_s: float) -> list[Child]:
    """The children of a kept run, as `dump_asks` wrote them (`root_of`: session → forwarding root)."""
    children = {session: Child(root, session, timeout_s) for session, root in root_of.items()}
    for rid, a in json.loads((folder / "asks.json").read_text()).items():
        ask = ChildAsk(a["session"], rid, a["command"], a["sent_at"], a["sent_at"] + timeout_s,
                       None if a["read"] is None else a["read"].encode(), a["read_at"], a["timed_out"])
        children[a["session"]].asks[rid] = ask
    stray = folder / "stray.json"
    if stray.exists():
        for rid, extra in json.loads(stray.read_text()).items():
            session = children[next(s for s in children if rid in children[s].asks)]
            session.stray[rid] = [d.encode() for d in extra]
    return list(children.values())


def table(rows: list[tuple[str, object]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def take_stacks(pid: int, out: Path, why: str) -> str:
    """What a stalled `serve` (`pid`) is doing, appended to `out` and returned (stall6): each thread's
    state and kernel wait channel, its unix sockets' queues (`ss -x`: the event loop's self-pipe is
    one; a full one drops a signal), and every thread's Python stack by `py-spy dump` when `py-spy` is
    on PATH (or named by `$PY_SPY`; install it outside the project, e.g. in a scratch venv)."""
    lines = [f"== {time.strftime('%H:%M:%S')} {why}: pid {pid}"]
    try:
        for task in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()
            name = Path(f"/proc/{pid}/task/{task}/comm").read_text().strip()
            wchan = Path(f"/proc/{pid}/task/{task}/wchan").read_text().strip()
            lines.append(f"thread {task} {name}: state {stat[0]}, waits in {wchan or '-'}, "
                         f"utime {stat[11]} stime {stat[12]} ticks")
    except OSError as exc:
        lines.append(f"/proc/{pid}: {exc}")
    sockets = subprocess.run(["ss", "-xpn"], capture_output=True, text=True, check=False).stdout
    lines += ["ss -xpn (Recv-Q Send-Q of its unix sockets):",
              *(line for line in sockets.splitlines() if f"pid={pid}," in line)]
    spy = os.environ.get("PY_SPY") or shutil.which("py-spy")
    if spy is None:
        lines.append("py-spy: not on PATH (set $PY_SPY): no Python stacks")
    else:
        dump = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, check=False,
                              timeout=60)
        lines += [dump.stdout, dump.stderr]
    text = "\n".join(lines) + "\n"
    with out.open("a") as stacks:
        stacks.write(text)
    return text
