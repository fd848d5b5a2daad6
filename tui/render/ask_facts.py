"""What a person reads about an ask, as plain facts: its values, hidden characters, risk hints, ages.

Pure functions of the ask (and the time for ages); the `Content` builders in `tui.render.ask` and
every widget read them from here.
"""

from __future__ import annotations

from core.vocabulary.asks import Ask
from core.wire.request import CarriedHop
from tui.render.risk import RiskHint, risk_hints
from tui.sanitize import has_hidden, safe_plain

VALUE_LIMIT = 400
LINE_LIMIT = 12


def child_strings(ask: Ask) -> list[str | None]:
    """Every string in the ask that came from the child (for the hidden-character flag)."""
    req = ask.request
    out: list[str | None] = [
        req.id,
        req.requester_session_id,
        req.target_session_id,
        req.requester_agent_name,
        req.message,
        req.surface,
        req.value,
    ]
    intent = ask.parsed.access_intent
    if intent is not None:
        out += [intent.surface, *intent.match_values, intent.boundary_value, intent.requester_cwd]
        out += [intent.principal.session_id, intent.principal.agent_name, intent.floor]
        for unit in intent.asking_units or ():
            out += [unit.command, unit.floor]
    for hop in req.hops or ():
        out += [hop.host, hop.session_id, hop.node]
    if req.session_approval is not None:
        for grant in req.session_approval.grants:
            out += [grant.surface, grant.pattern]
    payload = req.payload
    if payload is not None:
        p = payload.request
        out += [p.surface, p.tool_name, p.invoked_tool_name, p.value, p.matched_pattern, p.executed_unit]
        out += [p.requester.agent_name, p.requester.session_id]
        for ev in payload.evidence:
            out += [ev.label, ev.text, ev.detail]
        for note in payload.annotations:
            out += [note.source, note.text]
    return out


def carried_by(ask: Ask) -> list[str]:
    """The couriers the ask came through (`hops`), each `host/session/node`, first the one that read it
    from its child: untrusted provenance, shown (sanitised by the caller), never used for judgment."""
    return [f"{hop.host}/{hop.session_id}/{hop.node}" for hop in ask.request.hops or ()]


#: How a broker ask's session reads (`core/courier/broker_inbox.py`): `nats:<host>/<session>`.
BROKER_SCHEME = "nats:"


def broker_origin(ask: Ask) -> CarriedHop | None:
    """The courier that put the ask on the broker (its last hop), when the ask came from a broker: its
    host and session are what tell remote asks apart. Untrusted provenance: sanitise before showing."""
    hops = ask.request.hops
    if not hops:
        return None
    last = hops[-1]
    return last if ask.key.session_id == f"{BROKER_SCHEME}{last.host}/{last.session_id}" else None


def ask_has_hidden(ask: Ask) -> bool:
    return has_hidden(child_strings(ask))


def ask_risk(ask: Ask) -> tuple[RiskHint, ...]:
    """Risk hints from the child's facts (from its display text when it sent none). Never decides."""
    intent = ask.parsed.access_intent
    if intent is not None:
        return risk_hints(intent.surface, intent.match_values, intent.requester_cwd, intent.boundary_value)
    request = ask.request
    return risk_hints(request.surface or "", [request.value or ""])


def risk_label(hints: tuple[RiskHint, ...]) -> str:
    """The column text: the labels, joined (empty when there is nothing to point at)."""
    return ", ".join(hint.label for hint in hints)


def primary_surface(ask: Ask) -> str:
    intent = ask.parsed.access_intent
    if intent is not None:
        return intent.surface
    return ask.request.surface or "?"


def child_values(ask: Ask) -> list[str]:
    """What a one-line listing of the ask shows: agent, surface and every value the child sent."""
    intent = ask.parsed.access_intent
    values = list(intent.match_values) if intent is not None else [ask.request.value or ""]
    return [ask.request.requester_agent_name, primary_surface(ask), *values]


def primary_value(ask: Ask) -> str:
    intent = ask.parsed.access_intent
    if intent is not None and intent.match_values:
        return intent.match_values[0]
    return ask.request.value or ""


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def age_seconds(ask: Ask, now: float) -> float:
    return max(0.0, now - ask.request.created_at / 1000)



def ask_label(ask: Ask) -> str:
    """A short sanitised one-liner: agent, surface, value (and the host a broker ask came from)."""
    label = (f"{safe_plain(ask.request.requester_agent_name, 24)} {safe_plain(primary_surface(ask), 20)} "
             f"{safe_plain(primary_value(ask), 60)}")
    origin = broker_origin(ask)
    return label if origin is None else f"{label} (from {safe_plain(origin.host, 40)})"
