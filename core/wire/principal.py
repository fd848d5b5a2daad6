"""Whose rules judge an ask: `principal.agentName` (the child's fact), not `requesterAgentName`.

Both names are unauthenticated child text. The rules are scoped to the principal
(`docs/design/contract.md` § Facts and judgment); when the two differ, every place that shows the ask (the
log line, the app, the history) shows both and flags the difference, so a person never approves
thinking of the wrong agent.
"""

from __future__ import annotations

from core.text import log_safe
from core.wire.request import ParsedRequest


def principal_agent(parsed: ParsedRequest) -> str:
    """The agent name the rules use: the principal's, or the requester's for a request without facts."""
    intent = parsed.access_intent
    return intent.principal.agent_name if intent else parsed.request.requester_agent_name


def agent_mismatch(requester: str, principal: str) -> str | None:
    """The warning to show when the names differ, else None."""
    if requester == principal:
        return None
    return "requesterAgentName differs from principal.agentName (the rules use the principal)"


def log_agents(parsed: ParsedRequest) -> str:
    """`agent=<principal>`, plus `requester=<name> AGENT-MISMATCH` when the names differ."""
    request = parsed.request  # `principal_agent` and `agent_mismatch` inlined: one line per ask
    requester, intent = request.requester_agent_name, request.access_intent
    principal = intent.principal.agent_name if intent else requester
    text = f"agent={log_safe(principal, 40)}"
    if requester != principal:
        text += f" requester={log_safe(requester, 40)} AGENT-MISMATCH"
    return text
