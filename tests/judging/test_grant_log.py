"""Grants a person can see and revoke: the Textual-free API on the real recorded authority."""

from __future__ import annotations

import json
import time
from pathlib import Path

from core.judging.grant_log import SESSION_SCOPE
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest, SessionGrant

S = "served-session"


def ask(value: str, agent: str = "Explore") -> ParsedRequest:
    body = {
        "id": f"r-{abs(hash(value))}", "createdAt": time.time() * 1000, "requesterSessionId": "child",
        "targetSessionId": S, "requesterAgentName": agent, "message": "?", "surface": "bash", "value": value,
        "accessIntent": {"surface": "bash", "matchValues": [value], "boundaryValue": None,
                         "requesterCwd": "/w", "principal": {"sessionId": "child", "agentName": agent}},
    }
    return parse_request(json.dumps(body).encode())


def authority(tmp_path: Path) -> RecordedAuthority:
    return RecordedAuthority(PolicyStore(tmp_path / "agent", None, None, home="/home/me"))


def test_a_grant_is_listed_with_its_provenance_and_use(tmp_path: Path) -> None:
    node = authority(tmp_path)
    before = time.time()
    node.record(S, [SessionGrant(surface="bash", pattern="npm test *")], "Builder")
    assert node.judge(ask("npm test --watch"), S).verdict == "allow"
    assert node.judge(ask("npm test a", agent="Other"), S).verdict == "allow"
    assert node.judge(ask("npm install"), S).verdict == "ask"
    [entry] = node.list_grants()
    assert (entry.session_id, entry.surface, entry.pattern) == (S, "bash", "npm test *")
    assert (entry.made_by, entry.asked_by, entry.agent_scope) == ("you", "Builder", SESSION_SCOPE)
    assert entry.decided == 2
    assert before <= entry.made_at <= time.time()


def test_revoking_takes_effect_for_the_next_ask(tmp_path: Path) -> None:
    node = authority(tmp_path)
    grants = [SessionGrant(surface="bash", pattern="make *"), SessionGrant(surface="bash", pattern="ls *")]
    node.record(S, grants, "Builder")
    assert node.judge(ask("make all"), S).verdict == "allow"
    first, second = node.list_grants()
    assert node.revoke_grant(S, first.grant_id)
    assert node.judge(ask("make all"), S).verdict == "ask"
    assert node.judge(ask("ls -la"), S).verdict == "allow"
    assert [e.pattern for e in node.list_grants()] == ["ls *"]
    assert not node.revoke_grant(S, first.grant_id)  # already gone
    assert not node.revoke_grant("another-session", second.grant_id)
