"""How answers are logged: each answer's part (who asked what, the verdict, who decided, why, how long it
waited), and a batch's parts joined, one line per session and `LOG_GROUP` answers.
"""

from __future__ import annotations

import logging

from core.text import log_safe
from core.wire.response import ForwardedResponse

log = logging.getLogger("pi_authorizer.serve")

#: Answers of one session per log line when a batch publishes several (each still says who asked
#: what, the verdict, who decided, why and how long it waited).
LOG_GROUP = 64
#: How a `;` inside one answer's part of a joined line is written: `; ` separates the answers, so no
#: child's value can split its answer in two or add an answer that never was (`log_safe` already
#: doubles a backslash a child wrote, so this escape cannot be typed by one).
SEMICOLON = "\\u003b"


def describe(response: ForwardedResponse, outcome: str, waited_s: float | None) -> str:
    """The answer's part of its log line: state, who decided, the reason, how long the ask waited."""
    source = response.decided_by
    by = source.kind if source is not None else "?"
    reason = f" reason={log_safe(response.denial_reason, 120)}" if response.denial_reason else ""
    waited = "" if waited_s is None else f" in {waited_s * 1000:.1f}ms"
    return f"-> {response.state} by={by} ({outcome}){reason}{waited}"


def joined(part: str) -> str:
    """An answer's part as it joins a line of several (no `;` of its own can split it)."""
    return part.replace(";", SEMICOLON)


def log_answers(lines: dict[str, list[str]]) -> None:
    """A batch's answers logged together: one line per session and `LOG_GROUP` answers."""
    for session_id, parts in lines.items():
        session = f"session={log_safe(session_id)}"
        for at in range(0, len(parts), LOG_GROUP):
            group = parts[at:at + LOG_GROUP]
            log.info("%s answered %d: %s", session, len(group), "; ".join(group))
