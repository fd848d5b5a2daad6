"""A Python responder built on core.wire answers the real child's gate."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.interop.harness import NodeDriver, child_ask_args, child_env, wait_until, write_json_atomic
from tests.interop.ids import CHILD_SESSION, UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

PATTERNS = ["git push *", "git push --tags *"]
ASK: dict[str, Any] = {
    "requestId": "toolu_session",
    "source": "tool_call",
    "message": "Agent 'Explore' requested bash command 'git push origin main'. Allow this command?",
    "surface": "bash",
    "value": "git push origin main",
    "toolName": "bash",
    "sessionApproval": {"surface": "bash", "patterns": PATTERNS},
}


def _respond(session_root: Path, state: str) -> Any:
    """Wait for the child's request, read it with core.wire and answer it atomically."""
    from core import wire

    requests_dir = session_root / "requests"
    wait_until(lambda: any(requests_dir.glob("*.json")), 20, f"a request in {requests_dir}")
    [path] = requests_dir.glob("*.json")
    parsed = wire.parse_request(path.read_bytes())
    req = parsed.request
    at = int(time.time() * 1000)
    by = wire.UserDecision(via="dialog")
    if state == "approved_for_session":
        response = wire.approve_for_session(responder=UUID_SESSION, at_ms=at, decided_by=by)
    elif state == "approved":
        response = wire.approve(responder=UUID_SESSION, at_ms=at, decided_by=by)
    else:
        response = wire.deny(responder=UUID_SESSION, at_ms=at, decided_by=by, reason="not today")
    write_json_atomic(session_root / "responses" / f"{req.id}.json", wire.encode_response(response))
    return parsed


@pytest.mark.parametrize("state", ["approved_for_session", "approved", "denied_with_reason"])
def test_child_gate_records_session_grant(
    node_driver: NodeDriver, forwarding_root: Path, workdir: Path, state: str
) -> None:
    session_root = forwarding_root / "sessions" / UUID_SESSION
    with node_driver.start(
        "child_ask.ts",
        child_ask_args(forwarding_root, CHILD_SESSION, "Explore", ASK, via_gate=True),
        workdir,
        env=child_env(UUID_SESSION),
    ) as child:
        parsed = _respond(session_root, state)
        out = child.wait().json_line()

    grants = parsed.request.session_approval
    assert grants is not None
    assert [(g.surface, g.pattern) for g in grants.grants] == [("bash", p) for p in PATTERNS]

    decision, outcome, rules = out["decision"], out["outcome"], out["sessionRules"]
    assert decision["state"] == state
    assert decision["responderSessionId"] == UUID_SESSION
    if state == "approved_for_session":
        assert outcome == {"action": "allow"}
        # The child records ITS OWN suggestion, every pattern of it, as session allow rules.
        assert rules == [
            {"surface": "bash", "pattern": p, "action": "allow", "layer": "session", "origin": "session"}
            for p in PATTERNS
        ]
    elif state == "approved":
        assert outcome == {"action": "allow"}
        assert rules == []
    else:
        assert outcome["action"] == "block"
        assert "Reason: not today." in outcome["reason"]
        assert rules == []
    # After reading the response the child removed request, response and the session folder.
    assert not session_root.exists()
