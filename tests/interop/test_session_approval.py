"""A Python responder built on core.wire answers the real child's gate."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.interop.harness import NodeDriver, child_ask_args, child_env, wait_until
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


def _respond(forwarding_root: Path, state: str) -> Any:
    """Serve one ask like a serving node: read it via core.forwarding.inbox/core.wire, answer, withdraw."""
    from core.forwarding.inbox import SessionInbox
    from core.wire.decisions import UserDecision
    from core.wire.reader import parse_request
    from core.wire.response import approve, approve_for_session, deny, encode_response

    inbox = SessionInbox(forwarding_root, UUID_SESSION)
    wait_until(lambda: bool(inbox.list_request_names()), 20, f"a request in {inbox.requests_dir}")
    [name] = inbox.list_request_names()
    parsed = parse_request(inbox.read_request(name))
    req = parsed.request
    at = int(time.time() * 1000)
    by = UserDecision(via="dialog")
    if state == "approved_for_session":
        response = approve_for_session(responder=UUID_SESSION, at_ms=at, decided_by=by)
    elif state == "approved":
        response = approve(responder=UUID_SESSION, at_ms=at, decided_by=by)
    else:
        response = deny(responder=UUID_SESSION, at_ms=at, decided_by=by, reason="not today")
    assert inbox.write_response(req.id, encode_response(response))
    inbox.delete_request(name)
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
        parsed = _respond(forwarding_root, state)
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
