"""One queue across hosts with real processes: a courier `serve --forward-to nats://` on one forwarding
root, two approver `serve --broker` nodes with their own rules, a real nats-server, children writing
asks, and one approver SIGKILLed halfway: every ask answered exactly once, by the approvers' rules."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.helpers import NatsServer, poll_until, request_body, session_dir, write_request_bytes
from tests.history.support import intent

REPO = Path(__file__).resolve().parents[2]
C = "019ff96a-cccc-7000-8000-0000000000c1"
pytestmark = pytest.mark.timeout(120)  # a hang guard, not a speed check


@contextmanager
def _serve(tmp_path: Path, name: str, rules: dict[str, str], *args: str) -> Iterator[subprocess.Popen[bytes]]:
    agent = tmp_path / f"agent-{name}"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": rules}}))
    root = tmp_path / f"root-{name}"
    root.mkdir(exist_ok=True)
    log = (tmp_path / f"{name}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "serve", "--agent-dir", str(agent), "--forwarding-root", str(root),
         "--state-dir", str(tmp_path / f"state-{name}"), *args],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(30)
        log.close()


def _served(tmp_path: Path, name: str, line: str) -> bool:
    path = tmp_path / f"{name}.log"
    return path.exists() and line in path.read_text(errors="replace")


def test_every_ask_is_answered_once_by_the_approvers_rules_with_one_approver_killed_halfway(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    rules = {"ls *": "allow", "rm *": "deny"}
    asks = 24
    with ExitStack() as stack:
        approvers = [stack.enter_context(_serve(tmp_path, f"a{i}", rules, "--broker", nats_server.url,
                                                "--on-ask", "deny")) for i in (1, 2)]
        stack.enter_context(_serve(tmp_path, "c", {}, "--session", C, "--forward-to", nats_server.url,
                                   "--on-ask", "deny"))
        for name in ("a1", "a2"):
            up = functools.partial(_served, tmp_path, name, "serving the asks of broker")
            poll_until(up, 60, f"{name} up")
        poll_until(lambda: _served(tmp_path, "c", "serving session"), 60, "the courier up")
        root = tmp_path / "root-c"
        commands = {}
        for n in range(asks):
            command = ("ls src", "rm -rf build", "make deploy")[n % 3]
            commands[f"r{n:03d}"] = command
            body = request_body(f"r{n:03d}", C, surface="bash", value=command,
                                accessIntent=intent("bash", command))
            write_request_bytes(root, C, f"r{n:03d}.json", json.dumps(body).encode())
            if n == asks // 2:
                approvers[0].send_signal(signal.SIGKILL)
        responses = session_dir(root, C) / "responses"
        poll_until(lambda: len(list(responses.glob("*.json"))) == asks, 90, "every ask answered")
        for request_id, command in commands.items():
            answer = json.loads((responses / f"{request_id}.json").read_bytes())
            assert answer["responderSessionId"] == C
            assert answer["decidedBy"]["kind"] == "forwarded", answer
            inner = answer["decidedBy"]["decision"]
            if command == "ls src":
                assert answer["approved"] is True and inner["kind"] == "rule"
            elif command == "rm -rf build":
                assert answer["approved"] is False and inner["kind"] == "rule"
            else:  # no rule of the approvers: their fail-safe (--on-ask deny), with a reason
                assert answer["approved"] is False and inner["kind"] == "unavailable"
                assert answer["denialReason"]
        # the courier removes each request once its answer is placed: waited for, not raced
        requests = session_dir(root, C) / "requests"
        poll_until(lambda: list(requests.iterdir()) == [], 30, "every request removed")
