"""The log line's agent part names the principal (whose rules judge) and flags a requester that differs."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from core.text import log_safe
from core.wire.principal import agent_mismatch, log_agents, principal_agent
from core.wire.reader import parse_request

WHO = {"sessionId": "s"}
NAMES = st.sampled_from(["Explore", "Explore ", "general", ""]) | st.text(max_size=50)


@given(NAMES, st.none() | NAMES)
def test_the_agent_part_is_the_principal_and_any_mismatch(requester: str, principal: str | None) -> None:
    request: dict[str, object] = {"id": "a", "createdAt": 1, "requesterSessionId": "s",
                                  "targetSessionId": "t", "requesterAgentName": requester}
    if principal is not None:
        request["accessIntent"] = {"surface": "bash", "matchValues": ["ls"], "boundaryValue": None,
                                   "requesterCwd": "/", "principal": {**WHO, "agentName": principal}}
    parsed = parse_request(json.dumps(request).encode())
    expected = f"agent={log_safe(principal_agent(parsed), 40)}"
    if agent_mismatch(requester, principal_agent(parsed)):
        expected += f" requester={log_safe(requester, 40)} AGENT-MISMATCH"
    assert log_agents(parsed) == expected
    assert ("AGENT-MISMATCH" in log_agents(parsed)) == (principal is not None and principal != requester)
