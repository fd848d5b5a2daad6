"""A headless node (`serve`) with the model judge, built by `core.wiring`, against a real local
chat-completions server: its allow and deny are final (deny with the reason the agent reads), a path
ask is never allowed by it, its failures fall to the fail-safe, and every review is recorded."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.history import HistoryStore
from core.judging.judge_record import JUDGE_FILE, JudgeRecord, measure
from core.judging.judge_setup import JudgeSettings
from core.vocabulary.asks import DenyingArbiter
from core.wiring import NodeOptions, build_node
from tests.helpers import poll_until, read_response_when_written, response_path, wait_for, write_request
from tests.judging.support import READ_ONLY, READS_SECRETS, ChatServer, Reply, chat_server, model_says

S = "019ff96b-0000-7000-8000-bbbbbbbbbbbb"


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


def intent(surface: str, value: str) -> dict[str, object]:
    return {"surface": surface, "matchValues": [value], "boundaryValue": value if surface != "bash" else None,
            "requesterCwd": "/repo", "principal": {"sessionId": "child", "agentName": "Explore"}}


async def test_serve_with_the_judge(tmp_path: Path, server: ChatServer) -> None:
    agent = tmp_path / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {}}))
    judge = JudgeSettings(server.url, "local-model", allow_surfaces=frozenset({"bash"}))
    options = NodeOptions(tmp_path / "root", tmp_path / "state", agent, tmp_path / "project", judge=judge)
    history = HistoryStore.in_state_dir(tmp_path / "state")
    node = build_node(options, history, DenyingArbiter())
    root = node.core.root
    node.core.add_session(S)
    serving = asyncio.create_task(node.core.run())

    async def answer(name: str, reply: Reply, surface: str, value: str) -> dict[str, Any]:
        server.script(reply)
        write_request(root, S, name, accessIntent=intent(surface, value),
                      message="the child's message: never shown to the judge")
        return await read_response_when_written(root, S, name)

    try:
        allowed = await answer("ls", model_says(READ_ONLY), "bash", "ls -la")
        assert allowed["state"] == "approved"
        by_judge = {"kind": "authorizer", "name": "judge", "verdict": "allow", "reason": None}
        assert allowed["decidedBy"] == by_judge
        denied = await answer("ssh", model_says(READS_SECRETS), "bash", "cat ~/.ssh/id_rsa")
        assert denied["state"] == "denied_with_reason" and denied["decidedBy"]["name"] == "judge"
        reason = denied["denialReason"]
        assert "model judge denied" in reason and "it reads the ssh key" in reason
        path = await answer("read", model_says(READ_ONLY), "read", "/home/me/notes.txt")
        assert path["state"] == "denied_with_reason" and path["decidedBy"]["kind"] == "unavailable"
        garbage = await answer("garbage", model_says("I think this is fine!"), "bash", "make")
        assert garbage["decidedBy"]["kind"] == "unavailable"  # the fail-safe, not the judge
        error = await answer("error", Reply(status=500, body=b"{}"), "bash", "make")
        assert error["decidedBy"]["kind"] == "unavailable"
        write_request(root, S, "nofacts")
        assert (await read_response_when_written(root, S, "nofacts"))["decidedBy"]["kind"] == "unavailable"
        assert len(server.requests) == 5  # the ask without facts never reached the judge
        assert all("never shown to the judge" not in json.dumps(r) for r in server.requests)
        await wait_for(lambda: len(history.query()) == 6, what="six history rows")
    finally:
        node.core.stop()
        await asyncio.wait_for(serving, 10)
    record = JudgeRecord(tmp_path / "state" / JUDGE_FILE)
    routed = {r["request_id"]: (r["recommendation"], r["routed"]) for r in record.reviews()}
    record.close()
    assert routed == {"ls": ("allow", "decided"), "ssh": ("deny", "decided"), "read": ("allow", "capped"),
                      "garbage": ("defer", "failed"), "error": ("defer", "failed")}
    [bash, read] = measure(tmp_path / "state" / JUDGE_FILE, history.path)
    history.close()
    assert (bash.surface, bash.reviewed, bash.failed, bash.compared) == ("bash", 4, 2, 0)
    assert read.reviewed == 1 and bash.latency() is not None


def test_the_serve_command_with_a_judge(tmp_path: Path, server: ChatServer) -> None:
    """`pi-authorizer serve --judge URL` as a process: its deny is final with the reason the agent reads,
    an outage opens the breaker (said once in the log) and the fail-safe answers meanwhile."""
    agent, root, state = tmp_path / "agent", tmp_path / "root", tmp_path / "state"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {}}))
    server.script(model_says(READS_SECRETS))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "serve", "--session", S, "--forwarding-root", str(root),
         "--state-dir", str(state), "--agent-dir", str(agent), "--project", str(tmp_path / "p"),
         "--judge", server.url, "--judge-model", "m", "--judge-allow-surfaces", "bash"],
        cwd=repo, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        write_request(root, S, "ssh", accessIntent=intent("bash", "cat ~/.ssh/id_rsa"))
        poll_until(response_path(root, S, "ssh").exists, what="the judge's deny")
        denied = json.loads(response_path(root, S, "ssh").read_text())
        assert denied["decidedBy"]["name"] == "judge" and "it reads the ssh key" in denied["denialReason"]
        server.script(Reply(status=500, body=b"{}"))
        for n in range(4):
            write_request(root, S, f"e{n}", accessIntent=intent("bash", f"make {n}"))
            poll_until(response_path(root, S, f"e{n}").exists, what=f"the fail-safe on e{n}")
            body = json.loads(response_path(root, S, f"e{n}").read_text())
            assert body["decidedBy"]["kind"] == "unavailable"
        assert len(server.requests) == 4  # the last ask was not sent: the judge is unavailable
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert err.count("the model judge is unavailable") == 1
    assert "Bearer" not in err
