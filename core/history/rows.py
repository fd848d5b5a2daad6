"""A history row and the columns it is stored as: one shape from the parsed facts to `history --json`."""

from __future__ import annotations

import base64
import functools
import json
import json.encoder
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from pydantic import TypeAdapter

from core.serving.verdicts import VerdictRecord
from core.vocabulary.asks import AskKey
from core.wire.decisions import (
    AuthorizerDecision,
    DecisionSource,
    ForwardedDecision,
    GateErrorDecision,
    RuleDecision,
    SessionApprovalDecision,
    UnavailableDecision,
    UserDecision,
    YoloDecision,
    decision_source_json,
)
from core.wire.principal import agent_mismatch
from core.wire.request import ForwardedAccessIntent, ForwardedRequest, ParsedRequest, Principal
from core.wire.response import ForwardedResponse

APPROVED_STATES = ("approved", "approved_for_session")
DENIED_STATES = ("denied", "denied_with_reason")


@dataclass(frozen=True)
class HistoryRow:
    """A stored ask; field names are the column names (and the `history --json` keys).

    `outcome` is `pending` until the ask ends; `ended_at` is when it stopped being open for the
    child: its response linked, or withdrawn, or quarantined.
    """

    id: int
    served_session: str
    request_name: str
    request_id: str | None
    raw: bytes | None
    agent: str | None
    requester_session: str | None
    surface: str | None
    value: str | None
    message: str | None
    facts: str | None
    created_at: float | None
    arrived_at: float
    shown_at: float | None
    decided_at: float | None
    verdict: str | None
    decided_by: str | None
    decider: str | None
    responder_session: str | None
    decide_ms: float | None
    outcome: str
    reason: str | None
    response: bytes | None
    written: int | None
    ended_at: float | None
    source: str
    import_key: str | None

    def facts_json(self) -> dict[str, Any]:
        facts = loads(self.facts)
        return facts if isinstance(facts, dict) else {}

    def requester_agent(self) -> str | None:
        """The child's `requesterAgentName` (`agent` is `principal.agentName`, which the rules use)."""
        name = self.facts_json().get("requesterAgentName")
        return name if isinstance(name, str) else None

    def agent_mismatch(self) -> str | None:
        """The warning when the requester and principal agent names differ, else None."""
        requester = self.requester_agent()
        return None if requester is None else agent_mismatch(requester, self.agent or "")

    def decided_by_json(self) -> dict[str, Any] | None:
        source = loads(self.decided_by)
        return source if isinstance(source, dict) else None

    def to_json(self) -> dict[str, Any]:
        """Every column; BLOBs as base64, JSON columns as nested values, and one time unit:
        milliseconds (instants since the epoch, as the child's `createdAt`; `decide_ms` a span)."""
        out: dict[str, Any] = {}
        for name in COLUMNS:
            value = getattr(self, name)
            if isinstance(value, bytes):
                value = base64.b64encode(value).decode("ascii")
            elif name in ("facts", "decided_by"):
                value = loads(value)
            elif name in SECONDS_COLUMNS and value is not None:
                value = round(value * 1000, 3)
            out[name] = value
        return out


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(HistoryRow))
#: Instants stored in seconds (the child's `created_at` is already milliseconds).
SECONDS_COLUMNS = frozenset({"arrived_at", "shown_at", "decided_at", "ended_at"})


#: The columns `facts_values` gives, in its order.
FACTS_COLUMNS = (
    "request_id", "agent", "requester_session", "surface", "value", "message", "facts", "created_at",
)


def facts_columns(parsed: ParsedRequest) -> dict[str, object]:
    """The parsed facts as columns: child-fixed facts (what the rules judged) win over display fields."""
    return dict(zip(FACTS_COLUMNS, facts_values(parsed), strict=True))


def facts_values(parsed: ParsedRequest) -> tuple[object, ...]:
    """`facts_columns`' values, in the order of `FACTS_COLUMNS` (a burst's rows are plain tuples)."""
    request = parsed.request
    intent = parsed.access_intent
    surface = intent.surface if intent else request.surface
    value = intent.match_values[0] if intent and intent.match_values else request.value
    return (
        request.id,
        intent.principal.agent_name if intent else request.requester_agent_name,
        request.requester_session_id,
        surface,
        value,
        request.message,
        facts_json(parsed),
        request.created_at,
    )


def facts_json(parsed: ParsedRequest) -> str:
    """The `facts` column: the access intent and the fields beside it that no other column holds.
    Encoded by pydantic in one call, the intent model included (the same text as `dumps` of the
    dumped intent, at a third of its cost); where it cannot (a lone surrogate in a string, which JSON
    text in UTF-8 cannot carry), by `dumps` (`_facts_json`). The usual ask (no suggested grants,
    nothing dropped, no asking units) is written by hand (`_plain_facts`): the same text again, at
    a third of pydantic's cost."""
    request = parsed.request
    intent = request.access_intent
    if (request.session_approval is None and not parsed.dropped and _PLAIN_FACTS
            and (intent is None or intent.asking_units is None)):
        return _plain_facts(request, intent)
    try:
        encoded = _encode_facts(_facts(parsed, parsed.access_intent), by_alias=True)
    except ValueError:  # pydantic's serialization error
        return _facts_json(parsed)
    return encoded.decode()


#: Encodes a row's facts (`facts_json`): a dict of plain values and the intent's model. Its
#: serializer's own call: `TypeAdapter.dump_json`'s Python wrapper only passes its defaults on.
_encode_facts = TypeAdapter(dict[str, Any]).serializer.to_json


#: JSON's text of a string, as `dumps` writes it (`json`'s own C function).
_string = json.encoder.encode_basestring
#: Whether the intent's and the principal's fields are the ones `_plain_facts` writes, in their order
#: (a field added to the wire models turns the hand-written text off rather than leaving it out).
_PLAIN_FACTS = (
    tuple(f.alias for f in ForwardedAccessIntent.model_fields.values())
    == ("surface", "matchValues", "boundaryValue", "requesterCwd", "principal", "floor", "askingUnits")
    and tuple(f.alias for f in Principal.model_fields.values()) == ("sessionId", "agentName")
)


def _plain_facts(request: ForwardedRequest, intent: ForwardedAccessIntent | None) -> str:
    """`facts_json` of an ask with no suggested grants, nothing dropped and no asking units: `_facts`
    written field by field, each string by `json`'s encoder (what `dumps` does with it), into one
    f-string (built by the interpreter in one step: a join of a list, or `%` of a tuple, cost twice
    as much), a field that may be null inline (a call each cost more than its encoding; per ask)."""
    string = _string
    source = "null" if request.source is None else string(request.source)
    surface = "null" if request.surface is None else string(request.surface)
    value = "null" if request.value is None else string(request.value)
    agent = string(request.requester_agent_name)
    if intent is None:
        return (f'{{"accessIntent":null,"sessionApproval":null,"source":{source},"displaySurface":{surface},'
                f'"displayValue":{value},"dropped":null,"requesterAgentName":{agent}}}')
    values, boundary, floor = intent.match_values, intent.boundary_value, intent.floor
    principal = intent.principal
    return (
        f'{{"accessIntent":{{"surface":{string(intent.surface)},"matchValues":['
        f'{string(values[0]) if len(values) == 1 else ",".join(map(string, values))}],"boundaryValue":'
        f'{"null" if boundary is None else string(boundary)},"requesterCwd":{string(intent.requester_cwd)},'
        f'"principal":{{"sessionId":{string(principal.session_id)},"agentName":{string(principal.agent_name)}}},'
        f'"floor":{"null" if floor is None else string(floor)},"askingUnits":null}},"sessionApproval":null,'
        f'"source":{source},"displaySurface":{surface},"displayValue":{value},"dropped":null,'
        f'"requesterAgentName":{agent}}}'
    )


def _facts_json(parsed: ParsedRequest) -> str:
    intent = parsed.access_intent
    return dumps(_facts(parsed, intent.model_dump(by_alias=True, mode="json") if intent else None))


def _facts(parsed: ParsedRequest, intent: object) -> dict[str, Any]:
    """The `facts` column's fields, the intent as given (its model, or its dump)."""
    request = parsed.request
    return {
        "accessIntent": intent,
        "sessionApproval": _grants(parsed),
        "source": request.source,
        "displaySurface": request.surface,
        "displayValue": request.value,
        "dropped": parsed.dropped or None,
        "requesterAgentName": request.requester_agent_name,
    }


def _grants(parsed: ParsedRequest) -> list[Any] | None:
    approval = parsed.request.session_approval
    return [g.model_dump(mode="json") for g in approval.grants] if approval else None


def arrival_values(
    key: AskKey, parsed: ParsedRequest | None, at: float, raw: bytes | None = None
) -> dict[str, object]:
    """The columns of a new row for a request file that arrived at `at`."""
    values: dict[str, object] = {
        "served_session": key.session_id,
        "request_name": key.name,
        "arrived_at": at,
        "outcome": "pending",
        "raw": raw if raw is not None else (parsed.raw if parsed else None),
    }
    if parsed is not None:
        values.update(facts_columns(parsed))
    return values


def verdict_columns(verdict: VerdictRecord, now: float, started: float) -> dict[str, object]:
    """What recording a verdict stores in its row (`started`: when the ask arrived, or was shown)."""
    response = verdict.response
    decided_by, decider, outcome = decision_columns(response.decided_by, verdict.outcome, verdict.carried_to)
    return {
        "decided_at": now,
        "verdict": response.state,
        "decided_by": decided_by,
        "decider": decider,
        "responder_session": response.responder_session_id,
        "decide_ms": (now - started) * 1000,
        "outcome": outcome,
        "reason": response.denial_reason,
        "response": verdict.body,
        "written": None,
    }


#: The columns of `verdict_row`, in its order.
VERDICT_ROW = (
    "served_session", "request_name", "arrived_at", "raw", *FACTS_COLUMNS, "decided_at", "verdict",
    "decided_by", "decider", "responder_session", "decide_ms", "outcome", "reason", "response",
)


def verdict_row(
    verdict: VerdictRecord, parsed: ParsedRequest, arrived: float, raw: bytes | None, now: float
) -> tuple[object, ...]:
    """The new row of an ask whose arrival and verdict are written together (a burst's), as a plain
    tuple of `VERDICT_ROW`: what `arrival_values` and then `verdict_columns` store, without the two
    dicts per ask."""
    response = verdict.response
    decided_by, decider, outcome = decision_columns(response.decided_by, verdict.outcome, verdict.carried_to)
    key = verdict.key
    request = parsed.request
    intent = request.access_intent
    # `facts_values(parsed)` written out in place (one tuple per row, not two and a call).
    return (
        key.session_id, key.name, arrived, raw if raw is not None else parsed.raw,
        request.id,
        intent.principal.agent_name if intent else request.requester_agent_name,
        request.requester_session_id,
        intent.surface if intent else request.surface,
        intent.match_values[0] if intent and intent.match_values else request.value,
        request.message,
        facts_json(parsed),
        request.created_at,
        now, response.state, decided_by, decider, response.responder_session_id, (now - arrived) * 1000,
        outcome, response.denial_reason, verdict.body,
    )


def decision_columns(
    source: DecisionSource | None, outcome: str, carried_to: str | None = None
) -> tuple[str | None, str, str]:
    """Who decided, as stored: the `decidedBy` JSON, the decider in words, the outcome. A burst's
    verdicts share a few sources (one rule, the fail-safe): each is described once (`_described`),
    and a run of verdicts sharing the very same source (one response for a run of asks) finds it
    by identity before any hash (a frozen model's hash is Python code)."""
    global _last
    last = _last
    if last[0] is source and last[1] == outcome and last[2] == carried_to:
        return last[3]
    try:
        columns = _described(source, outcome, carried_to)
    except TypeError:  # a value that cannot be hashed: described afresh
        return _describe(source, outcome, carried_to)
    _last = (source, outcome, carried_to, columns)  # held: the source cannot be freed and its id reused
    return columns


def _describe(
    source: DecisionSource | None, outcome: str, carried_to: str | None
) -> tuple[str | None, str, str]:
    decided_by = dumps(decision_source_json(source)) if source is not None else None
    return decided_by, describe_decider(source, outcome, carried_to), outcome_kind(outcome, source)


#: Sources are frozen wire values (equal values, equal columns): the recent ones' columns, kept.
_described = functools.lru_cache(maxsize=256)(_describe)
#: The last source described (`decision_columns`), its outcome, where it was carried, its columns.
_last: tuple[object, str, str | None, tuple[str | None, str, str]] = (object(), "", None, (None, "", ""))


def fail_safe_columns(
    response: ForwardedResponse, body: bytes, at: float, started: float
) -> dict[str, object]:
    """What a fail-safe denial published when the ledger refused the verdict stores in its row: the
    answer the child read, written and ended at `at`."""
    source = response.decided_by
    return {
        "decided_at": at,
        "verdict": response.state,
        "decided_by": dumps(decision_source_json(source)) if source is not None else None,
        "decider": describe_decider(source, "fail-safe"),
        "responder_session": response.responder_session_id,
        "decide_ms": (at - started) * 1000,
        "outcome": "fail-safe",
        "reason": response.denial_reason,
        "response": body,
        "written": 1,
        "ended_at": at,
    }


def outcome_kind(outcome: str, source: DecisionSource | None) -> str:
    """The core's outcome, with a rule decision that came from a session grant named as such."""
    granted = isinstance(source, RuleDecision) and source.origin == "session"
    if outcome == "rule" and (granted or isinstance(source, SessionApprovalDecision)):
        return "session_grant"
    return outcome


def describe_decider(source: DecisionSource | None, outcome: str, carried_to: str | None = None) -> str:
    """Who or what decided, in words (the `decidedBy` JSON is stored beside it); a courier's relay
    names the target it was carried to (`carried_to`, else the responder up there)."""
    if isinstance(source, UserDecision):
        scope = {"user_grant": ", recorded a whole-session grant"}.get(outcome, "")
        return f"person ({source.via}){scope}"
    if isinstance(source, SessionApprovalDecision):
        by = "the grant just recorded: " if outcome == "session_grant" else ""
        return f"{by}session grant {source.surface} {source.pattern!r}"
    if isinstance(source, RuleDecision):
        if outcome == "rule_written":
            return f"the rule just written by the person: rule {source.surface} {source.pattern!r} " \
                   f"({source.origin or '?'})"
        return f"rule {source.surface} {source.pattern!r} ({source.origin or '?'})"
    if isinstance(source, AuthorizerDecision):
        return f"chain link {source.name}"
    if isinstance(source, UnavailableDecision):
        return f"fail-safe: {source.reason}"
    if isinstance(source, GateErrorDecision):
        return f"gate error: {source.reason}"
    if isinstance(source, YoloDecision):
        return "yolo"
    if isinstance(source, ForwardedDecision) and outcome == "courier":
        inner = describe_decider(source.decision, "")
        where = carried_to or f"session:{source.responder_session_id or '?'}"
        return f"carried to {where}, decided there by {inner or '?'}"
    if isinstance(source, ForwardedDecision):
        inner = describe_decider(source.decision, outcome)
        return f"forwarded by {source.responder_session_id or '?'}: {inner}"
    if source is None:
        return outcome
    return source.kind


def storable(params: Iterable[object]) -> tuple[object, ...]:
    """SQL parameters SQLite can take: a lone surrogate (the real child writes one when its text
    truncation splits a pair) is kept as its `\\udXXX` escape, which in a JSON column is exactly the
    JSON escape of that character. Everything else is bound unchanged (an ASCII string has no
    surrogate: a flag of the string, read without encoding it)."""
    return tuple([_text(p) if isinstance(p, str) and not p.isascii() else p for p in params])


def _text(value: str) -> str:
    if value.isascii():  # no surrogate (a flag of the string: nothing is encoded)
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


#: The encoder `json.dumps(value, ensure_ascii=False, separators=(",", ":"))` would build on every
#: call, built once (the same text; building it cost as much as encoding a row's facts).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: object) -> str:
    return _ENCODER.encode(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
