"""Shared round-trip measurement: rename a request into an inbox, time until its response exists."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from core.disk.paths import encode_session_id

SESSION = "bench-session"
REPO = Path(__file__).resolve().parents[1]


def start_serve(
    root: Path,
    state: Path,
    extra: list[str],
    sessions: tuple[str, ...] = (SESSION,),
    stderr: int = subprocess.DEVNULL,
    repo: Path = REPO,
) -> subprocess.Popen[bytes]:
    """Start `serve` for `sessions` (from the checkout `repo`); returns once every session's heartbeat
    exists."""
    flags = [arg for sid in sessions for arg in ("--session", sid)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "serve", *flags, "--forwarding-root", str(root),
         "--state-dir", str(state), *extra],
        cwd=repo, stderr=stderr, start_new_session=True,
    )
    beats = [root / "serving" / f"{encode_session_id(sid)}.json" for sid in sessions]
    deadline = time.monotonic() + 20
    while not all(beat.exists() for beat in beats):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("serve did not start")
        time.sleep(0.01)
    time.sleep(0.2)
    return proc


def measure(count: int, extra: list[str], body_for: Callable[[str], dict[str, object]]) -> list[float]:
    """Milliseconds from `rename()` into `requests/` to `responses/<id>.json` existing, per request."""
    with tempfile.TemporaryDirectory() as tmp:
        root, state = Path(tmp) / "root", Path(tmp) / "state"
        session = root / "sessions" / encode_session_id(SESSION)
        (session / "requests").mkdir(parents=True)
        (session / "responses").mkdir()
        proc = start_serve(root, state, extra)
        samples: list[float] = []
        try:
            for i in range(count):
                rid = f"bench-{i:06d}"
                temp = session / "requests" / f"{rid}.json.{os.getpid()}.0.tmp"
                temp.write_bytes(json.dumps(body_for(rid)).encode())
                response = session / "responses" / f"{rid}.json"
                start = time.perf_counter()
                os.rename(temp, session / "requests" / f"{rid}.json")
                while not os.path.exists(response):
                    time.sleep(0.0001)
                samples.append((time.perf_counter() - start) * 1000)
                response.unlink()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        return samples


def report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(f"{name}: n={len(samples)} p50={statistics.median(ordered):.2f} ms p99={p99:.2f} ms "
          f"max={ordered[-1]:.2f} ms (the reference polls every 250 ms)")


def base_request(rid: str) -> dict[str, object]:
    return {"id": rid, "createdAt": time.time_ns() // 1_000_000, "requesterSessionId": "child",
            "targetSessionId": SESSION, "requesterAgentName": "Explore",
            "message": "Agent 'Explore' requested bash command 'ls'.", "surface": "bash", "value": "ls"}
