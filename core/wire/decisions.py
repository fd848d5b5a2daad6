"""`decidedBy`: what decided inside the responder, a tagged union on `kind`, read all-or-nothing."""

from __future__ import annotations

from typing import Annotated, Any, Literal

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


def decision_source_json(source: DecisionSource) -> dict[str, Any]:
    """The on-wire object (nullable fields stay present as null, as the reference writes them)."""
    return source.model_dump(by_alias=True, mode="json")
