"""Recorded authority against the real 20.7.3 child: no facts still asks, facts are judged by rule."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from core.disk.paths import encode_session_id
from tests.interop.harness import NodeDriver, child_ask_args, child_env, serve, wait_until
from tests.interop.ids import CHILD_SESSION, UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CONFIG = {"permission": {"bash": {"git *": "allow", "git push *": "deny"}}}


def test_legacy_child_is_asked_while_a_newest_request_is_approved_by_rule(
    node_driver: NodeDriver, forwarding_root: Path, state_dir: Path, workdir: Path, tmp_path: Path
) -> None:
    agent_dir = tmp_path / "agent"
    config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(CONFIG))
    folder = encode_session_id(UUID_SESSION)
    extra = ["--agent-dir", str(agent_dir), "--project", str(tmp_path / "project")]
    legacy_ask: dict[str, Any] = {
        "requestId": "ignored",
        "source": "tool_call",
        "surface": "bash",
        "value": "git status",
        "toolName": "bash",
        "message": "Agent 'Explore' requested bash command 'git status'. Allow?",
    }
    with serve(
        [UUID_SESSION], forwarding_root, state_dir, "deny", workdir, [f"{folder}.json"], extra_args=extra
    ) as served:
        # The real 20.7.3 child sends no accessIntent: its display value matches `git *`, but
        # facts are never re-derived from display fields, so the ask reaches the arbiter.
        legacy = node_driver.run(
            "child_ask.ts",
            child_ask_args(forwarding_root, CHILD_SESSION, "Explore", legacy_ask),
            env=child_env(UUID_SESSION),
        ).json_line()
        # A newest-generation request carrying facts is decided by this node's rule at once.
        requests = forwarding_root / "sessions" / folder / "requests"
        body = {
            "id": "toolu_01AbCdEf",
            "createdAt": time.time() * 1000,
            "requesterSessionId": CHILD_SESSION,
            "targetSessionId": UUID_SESSION,
            "requesterAgentName": "Explore",
            "surface": "bash",
            "value": "git status",
            "sessionApproval": {"grants": [{"surface": "bash", "pattern": "git status *"}]},
            "accessIntent": {
                "surface": "bash",
                "matchValues": ["git status"],
                "boundaryValue": None,
                "requesterCwd": "/worktree/issue-42",
                "principal": {"sessionId": CHILD_SESSION, "agentName": "Explore"},
            },
        }
        requests.mkdir(parents=True, exist_ok=True)
        (forwarding_root / "sessions" / folder / "responses").mkdir(exist_ok=True)
        temp = requests / "toolu_01AbCdEf.json.1.1.tmp"
        temp.write_text(json.dumps(body))
        temp.rename(requests / "toolu_01AbCdEf.json")
        response = forwarding_root / "sessions" / folder / "responses" / "toolu_01AbCdEf.json"
        wait_until(
            response.exists, 10, "the rule-decided response", alive=served.proc, describe=served.stderr_text
        )
        ours = node_driver.run("read_response.ts", [str(response)]).json_line()
        raw = json.loads(response.read_bytes())

    # Fail-safe: nobody attends, and the agent is told so.
    assert legacy["approved"] is False and legacy["state"] == "denied_with_reason"
    assert "by=unavailable" in served.stderr_text()
    assert raw["state"] == "approved"
    assert raw["decidedBy"] == {"kind": "rule", "surface": "bash", "pattern": "git *", "origin": "global"}
    assert ours["approved"] is True and ours["state"] == "approved"
