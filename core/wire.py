"""The forwarded-permission wire: request and response models, a tolerant reader, a strict writer.

Reading follows the reference's tolerance (`wire-contract.md` §1.7, §2): five required fields decide
whether a request is usable, a malformed optional field is dropped on its own, and `accessIntent`,
`payload` and `sessionApproval` are all-or-nothing. Writing follows the strictest reader we know of:
only the four on-wire states, `approved` agreeing with `state`, compact JSON with no trailing newline.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from core.facts import AskingUnit, IntentFacts

MAX_REQUEST_BYTES = 1024 * 1024
MAX_DECISION_DEPTH = 4

# What one request may ask this node to judge (issue 9 §2). Beyond any of these the ask is denied
# at once with the limit in its reason, before any rule sees it: work and memory per ask stay bounded
# however many values a child sends. Generous for real children: a bash chain splits into a few
# dozen units, a path ask carries a handful of aliases, a heredoc command a few KiB.
MAX_MATCH_VALUES = 256
MAX_ASKING_UNITS = 256
MAX_VALUE_CHARS = 64 * 1024
MAX_FACTS_CHARS = 256 * 1024


class _Wire(BaseModel):
    """Strict (no coercion), immutable, camelCase on the wire, unknown fields ignored."""

    model_config = ConfigDict(
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
    )


# JSON arrays arrive as lists; a strict model would refuse them for tuple fields. Only the container
# is lax: its items stay strict, so a number never becomes a string.
StrTuple = Annotated[tuple[StrictStr, ...], Field(strict=False)]


def _reject_null(value: object) -> object:
    """For keys that may be absent but, when present, must not be null."""
    if value is None:
        raise ValueError("must be a string when present")
    return value


# ---------------------------------------------------------------------------------------------
# ForwardedAccessIntent: the child-fixed facts (ADR 0008 §2)


class Principal(_Wire):
    session_id: str
    agent_name: str


def _read_asking_units(value: object) -> tuple[AskingUnit, ...]:
    """`askingUnits` as the rules' own `AskingUnit` values: a non-empty array of `{command, floor?}`
    objects (unknown keys ignored, a present `floor` must be a string)."""
    if not isinstance(value, list | tuple) or not value:
        raise ValueError("must be a non-empty array when present")
    units = []
    for item in value:
        if isinstance(item, AskingUnit):
            units.append(item)
            continue
        if not isinstance(item, dict) or not isinstance(item.get("command"), str):
            raise ValueError("each unit must be an object with a string command")
        if "floor" in item and not isinstance(item["floor"], str):
            raise ValueError("a unit's floor must be a string when present")
        units.append(AskingUnit(item["command"], item.get("floor")))
    return tuple(units)


def _asking_units_json(units: tuple[AskingUnit, ...] | None) -> list[dict[str, str | None]] | None:
    return None if units is None else [{"command": u.command, "floor": u.floor} for u in units]


class ForwardedAccessIntent(_Wire):
    """What is accessed, in every form the child's gate recognises, and by whom. Never re-derived."""

    surface: str
    match_values: StrTuple
    boundary_value: str | None
    requester_cwd: str
    principal: Principal
    floor: str | None = None
    asking_units: Annotated[
        tuple[AskingUnit, ...] | None, PlainValidator(_read_asking_units), PlainSerializer(_asking_units_json)
    ] = None

    _floor_not_null = field_validator("floor", mode="before")(_reject_null)

    @model_validator(mode="before")
    @classmethod
    def _boundary_key_required(cls, data: object) -> object:
        # `boundaryValue` is `string | null`: the key itself is required.
        if isinstance(data, dict) and "boundaryValue" not in data and "boundary_value" not in data:
            raise ValueError("boundaryValue is required (a string or null)")
        return data

    def facts(self) -> IntentFacts:
        """The judged part (rules and chain links), exactly as sent: provenance is left out."""
        return IntentFacts(self.surface, tuple(self.match_values), self.boundary_value, self.floor,
                           self.asking_units)


# ---------------------------------------------------------------------------------------------
# Display-side optional fields


class SessionGrant(_Wire):
    """One (surface, pattern) of the child's `sessionApproval` suggestion. Not yet a grant of this node:
    that is `core.rules.session.RecordedGrant`, made only when a person approves for the serving session."""

    surface: Annotated[str, Field(min_length=1)]
    pattern: str


class SuggestedGrants(_Wire):
    """The child's "for this session" suggestion, in either generation's shape, as (surface, pattern)."""

    shape: Literal["legacy", "grants"]
    grants: tuple[SessionGrant, ...]


class _LegacySessionApproval(_Wire):
    surface: Annotated[str, Field(min_length=1)]
    patterns: StrTuple


class _GrantsSessionApproval(_Wire):
    grants: Annotated[tuple[SessionGrant, ...], Field(min_length=1, strict=False)]


class PromptRequester(_Wire):
    agent_name: str | None = None
    forwarded: bool
    session_id: str | None = None


class PromptRequest(_Wire):
    requester: PromptRequester
    surface: str
    tool_name: str | None = None
    invoked_tool_name: str | None = None
    value: str
    matched_pattern: str | None = None
    command_context: Literal["command_substitution", "process_substitution", "subshell"] | None = None
    executed_unit: str | None = None


class PromptEvidence(_Wire):
    label: str
    text: str
    detail: str | None = None


class PromptAnnotation(_Wire):
    source: str
    text: str


class PromptPayload(_Wire):
    """The newest child's structured prompt: display only, never matched against rules."""

    kind: Literal[
        "bash",
        "mcp",
        "tool",
        "path",
        "external_directory",
        "bash_external_directory",
        "skill",
        "skill_read",
        "forwarded",
    ]
    request: PromptRequest
    evidence: Annotated[tuple[PromptEvidence, ...], Field(strict=False)]
    annotations: Annotated[tuple[PromptAnnotation, ...], Field(strict=False)]


PromptSource = Literal["tool_call", "skill_input", "skill_read"]


class ForwardedRequest(_Wire):
    """A usable request: the five required fields plus whichever optional ones survived reading."""

    id: str
    created_at: float
    requester_session_id: str
    target_session_id: str
    requester_agent_name: str
    message: str | None = None
    source: PromptSource | None = None
    surface: str | None = None
    value: str | None = None
    session_approval: SuggestedGrants | None = None
    payload: PromptPayload | None = None
    access_intent: ForwardedAccessIntent | None = None


@dataclass(frozen=True)
class ParsedRequest:
    """A request as read: the model, the exact bytes received and what was dropped and why."""

    request: ForwardedRequest
    raw: bytes
    dropped: dict[str, str] = field(default_factory=dict)

    @property
    def access_intent(self) -> ForwardedAccessIntent | None:
        return self.request.access_intent

    @property
    def facts(self) -> IntentFacts | None:
        """What this node's rules judge; None without usable facts (the ask floors to a person)."""
        intent = self.request.access_intent
        return None if intent is None else intent.facts()

    @property
    def agent_name(self) -> str:
        """The agent whose rules judge this ask: the child-fixed principal, else the display name."""
        intent = self.request.access_intent
        return intent.principal.agent_name if intent else self.request.requester_agent_name


class RequestRejected(ValueError):
    """The file is not a usable request; `reason` says why in words a person can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_REQUIRED_STRINGS = ("id", "requesterSessionId", "targetSessionId", "requesterAgentName")
_OPTIONAL_STRINGS = ("message", "surface", "value")
_SOURCES: frozenset[str] = frozenset({"tool_call", "skill_input", "skill_read"})


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-standard JSON number {name}")


def _decode_json_object(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestRejected(f"file is {len(data)} bytes, over the {MAX_REQUEST_BYTES}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestRejected(f"not valid UTF-8 (byte {exc.start})") from exc
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise RequestRejected(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise RequestRejected(f"JSON is not an object (got {type(value).__name__})")
    return value


def _finite_time(value: object) -> float:
    """`createdAt` as a float; a bool, a non-number or one beyond a float's range is refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestRejected("required field 'createdAt' must be a finite number")
    try:
        as_float = float(value)
    except OverflowError:
        as_float = math.inf
    if not math.isfinite(as_float):
        raise RequestRejected("required field 'createdAt' must be a finite number")
    return as_float


def over_limit(intent: ForwardedAccessIntent | None) -> str | None:
    """Why this ask exceeds what one request may ask (`MAX_*` above), or None when it is within.

    Counts are checked before sizes so a flood of values is refused without measuring each one.
    """
    if intent is None:
        return None
    values, units = intent.match_values, intent.asking_units or ()
    if len(values) > MAX_MATCH_VALUES:
        return f"accessIntent.matchValues has {len(values)} entries, over the limit of {MAX_MATCH_VALUES}"
    if len(units) > MAX_ASKING_UNITS:
        return f"accessIntent.askingUnits has {len(units)} entries, over the limit of {MAX_ASKING_UNITS}"
    texts = [*values, *(u.command for u in units)]
    if intent.boundary_value is not None:
        texts.append(intent.boundary_value)
    longest = max((len(t) for t in texts), default=0)
    if longest > MAX_VALUE_CHARS:
        return f"a value of accessIntent is {longest} characters long, over the limit of {MAX_VALUE_CHARS}"
    total = sum(len(t) for t in texts)
    if total > MAX_FACTS_CHARS:
        return f"the values of accessIntent total {total} characters, over the limit of {MAX_FACTS_CHARS}"
    return None


def _short_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "value"
    return f"{where}: {first['msg']}"


def _read_session_approval(value: object) -> SuggestedGrants:
    if isinstance(value, dict) and "grants" in value:
        newest = _GrantsSessionApproval.model_validate(value)
        return SuggestedGrants(shape="grants", grants=newest.grants)
    legacy = _LegacySessionApproval.model_validate(value)
    grants = tuple(SessionGrant(surface=legacy.surface, pattern=p) for p in legacy.patterns)
    return SuggestedGrants(shape="legacy", grants=grants)


def parse_request(data: bytes) -> ParsedRequest:
    """Read a request file's bytes; raise `RequestRejected` when the request is unusable."""
    obj = _decode_json_object(data)
    fields: dict[str, Any] = {}
    for key in _REQUIRED_STRINGS:
        if key not in obj:
            raise RequestRejected(f"required field {key!r} is missing")
        if not isinstance(obj[key], str):
            raise RequestRejected(f"required field {key!r} must be a string")
        fields[key] = obj[key]
    created = obj.get("createdAt")
    if "createdAt" not in obj:
        raise RequestRejected("required field 'createdAt' is missing")
    fields["createdAt"] = _finite_time(created)

    dropped: dict[str, str] = {}
    for key in _OPTIONAL_STRINGS:
        if key in obj and obj[key] is not None:
            if isinstance(obj[key], str):
                fields[key] = obj[key]
            else:
                dropped[key] = "not a string"
    if "source" in obj:
        if isinstance(obj["source"], str) and obj["source"] in _SOURCES:
            fields["source"] = obj["source"]
        else:
            dropped["source"] = "not one of tool_call, skill_input, skill_read"

    readers: dict[str, Any] = {
        "sessionApproval": _read_session_approval,
        "payload": PromptPayload.model_validate,
        "accessIntent": ForwardedAccessIntent.model_validate,
    }
    for key, reader in readers.items():
        if key not in obj:
            continue
        try:
            fields[key] = reader(obj[key])
        except ValidationError as exc:
            dropped[key] = _short_error(exc)
    return ParsedRequest(request=ForwardedRequest.model_validate(fields), raw=data, dropped=dropped)


# ---------------------------------------------------------------------------------------------
# DecisionSource: what decided inside the responder (a tagged union on `kind`)


class UserDecision(_Wire):
    kind: Literal["user"] = "user"
    via: Literal["dialog", "select"]


class AuthorizerDecision(_Wire):
    kind: Literal["authorizer"] = "authorizer"
    name: str
    verdict: Literal["allow", "deny"]
    reason: str | None


class RuleDecision(_Wire):
    kind: Literal["rule"] = "rule"
    surface: str
    pattern: str | None
    origin: str | None


class SessionApprovalDecision(_Wire):
    kind: Literal["session_approval"] = "session_approval"
    surface: str
    pattern: str | None


class YoloDecision(_Wire):
    kind: Literal["yolo"] = "yolo"
    pattern: str | None


class InfrastructureReadDecision(_Wire):
    kind: Literal["infrastructure_read"] = "infrastructure_read"


class UnavailableDecision(_Wire):
    kind: Literal["unavailable"] = "unavailable"
    reason: str


class GateErrorDecision(_Wire):
    kind: Literal["gate_error"] = "gate_error"
    reason: str


class ForwardedDecision(_Wire):
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


# ---------------------------------------------------------------------------------------------
# Response


WireState = Literal["approved", "approved_for_session", "denied", "denied_with_reason"]
ReadableState = Literal[
    "approved", "approved_for_session", "approved_for_serving_session", "denied", "denied_with_reason"
]
GrantWidth = Literal["proven", "family"]
_APPROVING: frozenset[str] = frozenset({"approved", "approved_for_session"})


class ForwardedResponse(_Wire):
    """A verdict as this node writes it. Invalid combinations cannot be constructed."""

    approved: bool
    state: WireState
    responder_session_id: str
    responded_at: int
    denial_reason: str | None = None
    decided_by: DecisionSource | None = None
    session_grant_width: GrantWidth | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ForwardedResponse:
        if self.approved != (self.state in _APPROVING):
            raise ValueError(f"approved={self.approved} contradicts state {self.state!r}")
        has_reason = self.denial_reason is not None and self.denial_reason.strip() != ""
        if (self.state == "denied_with_reason") != has_reason:
            raise ValueError("denied_with_reason needs a non-empty reason, and only it carries one")
        if self.session_grant_width is not None and self.state != "approved_for_session":
            raise ValueError("sessionGrantWidth belongs only to approved_for_session")
        return self


def approve(*, responder: str, at_ms: int, decided_by: DecisionSource | None) -> ForwardedResponse:
    """Allow once."""
    return ForwardedResponse(
        approved=True,
        state="approved",
        responder_session_id=responder,
        responded_at=at_ms,
        decided_by=decided_by,
    )


def approve_for_session(
    *, responder: str, at_ms: int, decided_by: DecisionSource | None, width: GrantWidth = "proven"
) -> ForwardedResponse:
    """Allow, and let the child record its own suggestion for its session."""
    return ForwardedResponse(
        approved=True,
        state="approved_for_session",
        responder_session_id=responder,
        responded_at=at_ms,
        decided_by=decided_by,
        session_grant_width=width,
    )


def deny(
    *, responder: str, at_ms: int, decided_by: DecisionSource | None, reason: str | None = None
) -> ForwardedResponse:
    """Block; a non-blank reason (trimmed) makes it `denied_with_reason`, relayed to the agent."""
    text = (reason or "").strip()
    return ForwardedResponse(
        approved=False,
        state="denied_with_reason" if text else "denied",
        denial_reason=text or None,
        responder_session_id=responder,
        responded_at=at_ms,
        decided_by=decided_by,
    )


def response_json(response: ForwardedResponse) -> dict[str, Any]:
    """The response object in the reference's key order; absent optional fields are omitted."""
    out: dict[str, Any] = {"approved": response.approved, "state": response.state}
    if response.denial_reason is not None:
        out["denialReason"] = response.denial_reason
    out["responderSessionId"] = response.responder_session_id
    out["respondedAt"] = response.responded_at
    if response.decided_by is not None:
        out["decidedBy"] = decision_source_json(response.decided_by)
    if response.session_grant_width is not None:
        out["sessionGrantWidth"] = response.session_grant_width
    return out


def compact_json(value: object) -> bytes:
    """`JSON.stringify` bytes: compact, UTF-8, no trailing newline (lone surrogates escaped)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def encode_response(response: ForwardedResponse) -> bytes:
    return compact_json(response_json(response))


@dataclass(frozen=True)
class ReadResponse:
    """A response as a child would read it (used to verify what is on disk)."""

    approved: bool
    state: ReadableState
    responder_session_id: str
    responded_at: float | None
    denial_reason: str | None
    decided_by: DecisionSource | None


def parse_response(data: bytes) -> ReadResponse | None:
    """The child's reader: `None` when it would reject the response (and deny)."""
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    approved, state, responder = obj.get("approved"), obj.get("state"), obj.get("responderSessionId")
    readable = {
        "approved",
        "approved_for_session",
        "approved_for_serving_session",
        "denied",
        "denied_with_reason",
    }
    if not isinstance(approved, bool) or state not in readable or not isinstance(responder, str):
        return None
    at = obj.get("respondedAt")
    reason = obj.get("denialReason")
    return ReadResponse(
        approved=approved,
        state=state,
        responder_session_id=responder,
        responded_at=float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None,
        denial_reason=reason if isinstance(reason, str) else None,
        decided_by=read_decision_source(obj["decidedBy"]) if "decidedBy" in obj else None,
    )
