"""How answers are logged: each answer's part (who asked what, the verdict, who decided, why, how long it
waited), and a batch's parts joined, one line per session and `LOG_GROUP` answers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from core.serving.verdicts import VerdictRecord
from core.text import log_safe, none_hidden
from core.vocabulary.events import asked
from core.wire.principal import log_agents
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


def told_parts(verdicts: Sequence[VerdictRecord], now: float) -> list[str]:
    """`told_part` of each answer of a batch, made as a batch: the verdicts' words and the agents and
    surface parts, shared by a burst's asks, once each; file names and values used as they are when
    nothing in any of them needs escaping or cutting, which is looked for once in all of them joined
    (an answer of a batch where something does is made as `told_part` makes it alone:
    `tests/core/test_answer_log.py` compares them)."""
    parts: list[str] = []
    names: list[str] = []
    values: list[str] = []
    said: dict[tuple[str, str, str], str] = {}
    words: dict[tuple[int, str], str] = {}  # each verdict's words, joined (a burst's share a few)
    # What the answer before said (a trip's answers share their agents, verdict and moment).
    last: tuple[str, str, str] | None = None  # none yet (an ask's three may all be empty)
    agents = ""
    last_said: tuple[ForwardedResponse | None, str, float | None] = (None, "", None)
    tail = ""
    for verdict in verdicts:
        parsed, response, outcome = verdict.parsed, verdict.response, verdict.outcome
        arrived = verdict.arrived
        request = parsed.request
        intent = request.access_intent
        requester = request.requester_agent_name
        if intent is None:
            principal, surface = requester, request.surface or "?"
            value = request.value or ""
        else:
            matched = intent.match_values
            principal, surface = intent.principal.agent_name, intent.surface
            value = matched[0] if matched else (request.value or "")
        if last is None or requester != last[0] or principal != last[1] or surface != last[2]:
            last = (requester, principal, surface)
            if (found := said.get(last)) is None:
                found = said[last] = joined(f"{log_agents(parsed)} surface={log_safe(surface, 40)}")
            agents = found
        if response is not last_said[0] or outcome != last_said[1] or arrived != last_said[2]:
            last_said = (response, outcome, arrived)
            if (told := words.get((id(response), outcome))) is None:
                told = words[id(response), outcome] = joined(describe(response, outcome, None))
            tail = f"{told} in {(now - (arrived or now)) * 1000:.1f}ms"
        name = verdict.key.name
        names.append(name)
        values.append(value)
        parts.append(f"request={name} {agents} value={value} {tail}")
    if not (_plain_names("".join(names), max(map(len, names), default=0))
            and _plain_values("".join(values), max(map(len, values), default=0))):
        for at, (name, value) in enumerate(zip(names, values, strict=True)):
            if not (_plain_names(name, len(name)) and _plain_values(value, len(value))):
                parts[at] = told_part(verdicts[at], now)
    return parts


def told_part(verdict: VerdictRecord, now: float) -> str:
    """One answer's part of a joined line, told at `now` (`told_parts` makes a batch's)."""
    waited = (now - (verdict.arrived or now)) * 1000
    told = describe(verdict.response, verdict.outcome, None)
    return joined(f"{asked(verdict.key, verdict.parsed)} {told} in {waited:.1f}ms")


# Each check is of a property of every character (but the longest's length): true of texts joined
# exactly when true of each of them.


def _plain_names(text: str, longest: int) -> bool:
    """File names `asked` shows as they are, and `joined` leaves be."""
    return longest <= 120 and text.isascii() and text.isprintable() and "\\" not in text and ";" not in text


def _plain_values(text: str, longest: int) -> bool:
    """Values `log_safe(value, 80)` leaves as they are, and `joined` too."""
    return longest <= 80 and "\\" not in text and ";" not in text and none_hidden(text)
