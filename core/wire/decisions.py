"""`decidedBy`: what decided inside the responder, a tagged union on `kind`, read all-or-nothing."""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Annotated, Any, Literal, cast

from pydantic import Field, TypeAdapter, ValidationError

from core.wire.base import WireModel

MAX_DECISION_DEPTH = 4


class UserDecision(WireModel):
    kind: Literal["user"] = "user"
    via: Literal["dialog", "select"]


class AuthorizerDecision(WireModel):
    kind: Literal["authorizer"] = "authorizer"
    name: str
    verdict: Literal["allow", "deny"]
    reason: str | None


class RuleDecision(WireModel):
    kind: Literal["rule"] = "rule"
    surface: str
    pattern: str | None
    origin: str | None


class SessionApprovalDecision(WireModel):
    kind: Literal["session_approval"] = "session_approval"
    surface: str
    pattern: str | None


class YoloDecision(WireModel):
    kind: Literal["yolo"] = "yolo"
    pattern: str | None


class InfrastructureReadDecision(WireModel):
    kind: Literal["infrastructure_read"] = "infrastructure_read"


class UnavailableDecision(WireModel):
    kind: Literal["unavailable"] = "unavailable"
    reason: str


class GateErrorDecision(WireModel):
    kind: Literal["gate_error"] = "gate_error"
    reason: str


class ForwardedDecision(WireModel):
    kind: Literal["forwarded"] = "forwarded"
    responder_session_id: str | None
    decision: DecisionSource | None


DecisionSource = Annotated[
    UserDecision
    | AuthorizerDecision
    | RuleDecision
    | SessionApprovalDecision
    | YoloDecision
    | InfrastructureReadDecision
    | UnavailableDecision
    | GateErrorDecision
    | ForwardedDecision,
    Field(discriminator="kind"),
]
ForwardedDecision.model_rebuild()
_DECISION_SOURCE: TypeAdapter[DecisionSource] = TypeAdapter(DecisionSource)


def _decision_depth(source: DecisionSource) -> int:
    if isinstance(source, ForwardedDecision) and source.decision is not None:
        return 1 + _decision_depth(source.decision)
    return 1


def read_decision_source(value: object) -> DecisionSource | None:
    """All-or-nothing at every depth, capped at depth 4; a malformed value reads as absent."""
    try:
        source = _DECISION_SOURCE.validate_python(value)
    except ValidationError:
        return None
    return source if _decision_depth(source) <= MAX_DECISION_DEPTH else None


#: Each kind's fields in order, with their on-wire names: what `model_dump(by_alias=True,
#: mode="json")` writes, built without pydantic's serializer (every ask's response and history row
#: writes one; `tests/core/test_wire.py` checks both give the same object for every kind).
_WIRE_FIELDS: dict[type[WireModel], tuple[tuple[str, str], ...]] = {
    kind: tuple((name, field.alias or name) for name, field in kind.model_fields.items())
    for kind in (UserDecision, AuthorizerDecision, RuleDecision, SessionApprovalDecision, YoloDecision,
                 InfrastructureReadDecision, UnavailableDecision, GateErrorDecision, ForwardedDecision)
}


def decision_source_json(source: DecisionSource) -> dict[str, Any]:
    """The on-wire object (nullable fields stay present as null, as the reference writes them)."""
    fields = _WIRE_FIELDS.get(type(source))
    if fields is None:  # a subclass: whatever its serializer writes
        return source.model_dump(by_alias=True, mode="json")
    out: dict[str, Any] = {}
    for name, alias in fields:
        value = getattr(source, name)
        # The one nested model is a forwarded decision's own `decision`: a decision source too.
        nested = isinstance(value, WireModel)
        out[alias] = decision_source_json(cast("DecisionSource", value)) if nested else value
    return out


#: Each kind's fields with their keys as written (`"name":`), for `decision_source_text`.
_WIRE_KEYS: dict[type[WireModel], tuple[tuple[str, str], ...]] = {
    kind: tuple((name, f'"{alias}":') for name, alias in fields) for kind, fields in _WIRE_FIELDS.items()
}


def decision_source_text(source: DecisionSource) -> str | None:
    """`decision_source_json` as compact JSON text (non-ASCII kept, as `core.wire.base.compact_json`
    writes it), built from its pieces; None for a value it was not made for (a subclass, a field
    of another type): the caller then writes the object the general way."""
    keys = _WIRE_KEYS.get(type(source))
    if keys is None:
        return None
    parts = []
    for name, key in keys:
        value = getattr(source, name)
        if type(value) is str:
            parts.append(key + encode_basestring(value))
        elif value is None:
            parts.append(key + "null")
        elif isinstance(value, WireModel):
            # The one nested model is a forwarded decision's own `decision`: a decision source too.
            nested = decision_source_text(cast("DecisionSource", value))
            if nested is None:
                return None
            parts.append(key + nested)
        else:
            return None
    return "{" + ",".join(parts) + "}"
