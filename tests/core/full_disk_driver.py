"""Run inside a private mount namespace (`unshare -m`, as root) by `test_full_filesystem.py`: the
forwarding root is a small tmpfs that is really full; a real `serve` answers it. Prints one JSON line
with what it saw. Scenarios: `fills` (the disk fills, then asks arrive), `fills-while-asking` (asks
arrive one by one while the disk fills between them), `full-at-start`,
`all-full-at-start` (the state dir, with an existing history, on the full filesystem too).

Usage: python -m tests.core.full_disk_driver <scenario> <tmp dir>
"""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from core.forwarding.liveness import heartbeat_path, read_heartbeat
from core.history import HistoryStore
from tests.helpers import fill, poll_until, request_body, response_path, session_dir, stop_serve
from tests.history.support import REPO, S

ASKS = 3  # fewer than a burst (4+), which is answered in the request files themselves (no new space)
#: `fills-while-asking`: one at a time (never a burst), the disk growing fuller between them.
ASKS_WHILE_FILLING = 12
CHUNK = 96 * 1024


def grow(filler: Path, size: int) -> bool:
    """Append up to `size` bytes to `filler`; False once the filesystem refused (it is full)."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(size // 4096):
            try:
                os.write(fd, b"x" * 4096)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return False
    finally:
        os.close(fd)
    return True


def answered_or_waiting(response: Path, serve: subprocess.Popen[bytes], log: Path, waits: int) -> bool:
    """The ask is answered, or serve said once more that it waits for the disk (or it exited)."""
    said = log.read_text(errors="replace").count("waiting for disk")
    return response.exists() or said > waits or serve.poll() is not None


def request_removed(request: Path, serve: subprocess.Popen[bytes]) -> bool:
    """The answered request was taken out of the inbox (its block freed), or serve exited."""
    return not request.exists() or serve.poll() is not None


def stage_asks(root: Path, asks: int = ASKS) -> list[tuple[Path, Path]]:
    """Requests written while there is space (as a child's temps), to be renamed in once it is full."""
    requests = session_dir(root, S) / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    (session_dir(root, S) / "responses").mkdir(exist_ok=True)
    staged = []
    for n in range(asks):
        request_id = f"ask{n}"
        temp = requests / f"{request_id}.json.{os.getpid()}.{n}.tmp"
        temp.write_bytes(json.dumps(request_body(request_id, S)).encode())
        staged.append((temp, requests / f"{request_id}.json"))
    return staged


def main(scenario: str, tmp: Path) -> None:
    fs, log_path = tmp / "fs", tmp / "serve.log"
    fs.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(fs)], check=True)
    root = fs / "root"
    # `all-full-at-start`: the state dir (history, locks, quarantine) is on the full filesystem too.
    state = fs / "state" if scenario == "all-full-at-start" else tmp / "state"
    root.mkdir()
    (tmp / "agent").mkdir(exist_ok=True)
    asks = ASKS_WHILE_FILLING if scenario == "fills-while-asking" else ASKS
    staged = stage_asks(root, asks)
    if scenario == "all-full-at-start":  # a node that served here before: its history exists
        HistoryStore.in_state_dir(state).close()
    filler = fill(fs) if scenario not in ("fills", "fills-while-asking") else None
    command = [
        sys.executable, "-m", "tui.cli", "serve", "--session", S,
        "--forwarding-root", str(root), "--state-dir", str(state),
        "--on-ask", "deny", "--agent-dir", str(tmp / "agent"), "--project", str(tmp),
    ]  # fmt: skip
    seen: dict[str, object] = {"scenario": scenario}
    with log_path.open("wb") as log:
        serve = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log)
    try:
        def logged() -> str:
            return log_path.read_text(errors="replace")

        def answered() -> bool:
            return all(response_path(root, S, f"ask{n}").exists() for n in range(asks))

        if scenario == "fills-while-asking":
            poll_until(lambda: read_heartbeat(heartbeat_path(root, S)) is not None, 30, "the heartbeat")
            filler, room = fs / "filler", True
            for n, (temp, target) in enumerate(staged):
                waits = logged().count("waiting for disk")
                if not room:  # full: take back the blocks answered requests freed, so this ask waits
                    grow(filler, 1 << 20)
                temp.rename(target)  # an ask arrives (a rename needs no space) ...
                room = room and grow(filler, CHUNK)  # ... and the disk fills some more
                settled = functools.partial(answered_or_waiting, response_path(root, S, f"ask{n}"), serve,
                                            log_path, waits)
                poll_until(settled, 60, f"ask{n} answered or waiting for disk")
                if response_path(root, S, f"ask{n}").exists():  # its request's block is freed next
                    removed = functools.partial(request_removed, target, serve)
                    poll_until(removed, 60, f"ask{n}'s request removed")
            seen["full_before_last_ask"] = not room
            seen["answered_before_full"] = sum(response_path(root, S, f"ask{n}").exists()
                                               for n in range(asks))
            fill(fs)  # whatever room the answers left: full now
        if filler is None:
            poll_until(lambda: read_heartbeat(heartbeat_path(root, S)) is not None, 30, "the heartbeat")
            filler = fill(fs)
        if scenario != "fills-while-asking":
            for temp, target in staged:
                temp.rename(target)  # a rename needs no space: asks arrive on the full disk
        poll_until(lambda: "waiting for disk" in logged() or serve.poll() is not None, 60, "waiting for disk")
        poll_until(lambda: logged().count("waiting for disk") >= 3 or serve.poll() is not None, 60,
                   "more than one try")
        seen["alive_while_full"] = serve.poll() is None
        quarantine = state / "quarantine"
        seen["quarantined_while_full"] = sorted(
            str(p.relative_to(quarantine)) for p in quarantine.rglob("*") if p.is_file()
        ) if quarantine.exists() else []
        filler.unlink()
        poll_until(lambda: answered() or serve.poll() is not None, 90, "every ask answered")
        seen["responses"] = {
            f"ask{n}": json.loads(response_path(root, S, f"ask{n}").read_bytes())
            for n in range(asks) if response_path(root, S, f"ask{n}").exists()
        }
        requests = session_dir(root, S) / "requests"
        poll_until(lambda: not any(requests.glob("*.json")) or serve.poll() is not None, 30,
                   "the answered requests taken out of the inbox")
        seen["requests_left"] = sorted(p.name for p in requests.glob("*.json"))
        poll_until(lambda: read_heartbeat(heartbeat_path(root, S)) is not None or serve.poll() is not None,
                   30, "the heartbeat")
        seen["heartbeat"] = read_heartbeat(heartbeat_path(root, S)) is not None
        seen["alive_after"] = serve.poll() is None
    finally:
        stop_serve(serve)
        seen["returncode"] = serve.returncode
        seen["log_tail"] = log_path.read_text(errors="replace")[-3000:]
        subprocess.run(["umount", "-l", str(fs)], check=False)
        print(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
    sys.stdout.flush()
    time.sleep(0)
