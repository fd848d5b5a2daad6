"""`--forward-to` on the command line: one-line refusals, and a courier `serve` killed with SIGKILL
mid-carry and restarted (real processes, real files): no second request at P, the verdict relayed once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.courier.targets import TargetError, parse_target
from core.disk.paths import encode_session_id
from tests.helpers import poll_until, request_body, session_dir, write_request_bytes
from tests.history.support import intent

REPO = Path(__file__).resolve().parents[2]
C = "019ff96a-cccc-7000-8000-000000000031"
P = "019ff96a-pppp-7000-8000-000000000032"
pytestmark = pytest.mark.timeout(120)  # a hang guard, not a speed check


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=100, check=False)


@pytest.mark.parametrize(("target", "said"), [
    (f"session:{C}", "is this node's own session"),
    ("ftp://host", "unknown target (use session:ID or nats://HOST:PORT)"),
    ("session:unknown", "names no session"),
    ("nats://user:pw@host:4222", "a nats target is nats://HOST:PORT"),
    ("nats://nohost", "a nats target is nats://HOST:PORT"),
])
def test_a_target_that_cannot_be_served_is_refused_in_one_line(target: str, said: str) -> None:
    with pytest.raises(TargetError) as refused:
        parse_target(target, [C])
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_command_says_a_refused_target_in_one_line_and_serves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "agent" / "sessions" / "permission-forwarding"
    root.mkdir(parents=True)
    result = _cli("serve", "--session", C, "--forward-to", f"session:{C}", "--forwarding-root", str(root),
                  "--state-dir", str(tmp_path / "state"))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is this node's own session" in lines[0], result.stderr
    assert not (root / "serving").exists()


@contextmanager
def _serving_p(root: Path) -> Iterator[None]:
    """P's heartbeat kept fresh by this process, as a live server keeps it (the test answers for P)."""
    serving = root / "serving"
    serving.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            temp = serving / f"beat.{time.time_ns()}.tmp"
            temp.write_text(json.dumps({"sessionId": P, "pid": os.getpid(), "updatedAt": time.time() * 1000}))
            temp.rename(serving / f"{encode_session_id(P)}.json")
            stop.wait(0.5)

    beating = threading.Thread(target=beat)
    beating.start()
    try:
        yield
    finally:
        stop.set()
        beating.join()


def _courier(root: Path, state: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "serve", "--session", C, "--forward-to", f"session:{P}",
             "--forwarding-root", str(root), "--state-dir", str(state)],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=sink, start_new_session=True)


def test_a_courier_killed_mid_carry_and_restarted_asks_once_and_relays_once(tmp_path: Path) -> None:
    root, state, log = tmp_path / "root", tmp_path / "state", tmp_path / "courier.log"
    root.mkdir()
    requests_p = session_dir(root, P) / "requests"
    with _serving_p(root):
        first = _courier(root, state, log)
        try:
            body = request_body("toolu_k", C, accessIntent=intent("bash", "make deploy"))
            write_request_bytes(root, C, "toolu_k.json", json.dumps(body).encode())
            poll_until(lambda: requests_p.exists() and any(requests_p.glob("*.json")), what="carried")
            [carried] = list(requests_p.glob("*.json"))
            inode = carried.stat().st_ino
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
        second = _courier(root, state, log)
        try:
            try:
                poll_until(lambda: "already there" in log.read_text(errors="replace"), what="found again")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{log.read_text(errors='replace')}") from exc
            assert [p.name for p in requests_p.iterdir()] == [carried.name]
            assert carried.stat().st_ino == inode  # never written again: P is asked once
            response = session_dir(root, P) / "responses" / carried.name
            answer = {"approved": True, "state": "approved", "responderSessionId": P,
                      "decidedBy": {"kind": "user", "via": "dialog"}}
            temp = response.with_name("answer.tmp")
            temp.write_text(json.dumps(answer))
            temp.rename(response)  # as a server writes it
            carried.unlink()  # answered, as P's server removes the request
            answer_c = session_dir(root, C) / "responses" / "toolu_k.json"
            poll_until(answer_c.exists, what="the verdict relayed to the child")
            assert json.loads(answer_c.read_bytes())["decidedBy"]["responderSessionId"] == P
            poll_until(lambda: not response.exists(), what="P's answer removed once relayed")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(20)
    with sqlite3.connect(state / "history.sqlite3") as db:
        rows = db.execute("SELECT request_name, outcome, written FROM asks").fetchall()
    assert rows == [("toolu_k.json", "courier", 1)]
