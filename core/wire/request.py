"""The forwarded request as this node models it: the child-fixed facts (`accessIntent`) and the
display-side optional fields (`docs/design/contract.md` § Reading requests, § Facts and judgment). Reading
a file into these is `core.wire.reader`'s job.
"""

from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

from pydantic import Field, PlainSerializer, PlainValidator, field_validator, model_validator

from core.wire.base import StrTuple, WireModel, reject_null
from core.wire.facts import AskingUnit, IntentFacts

# ---------------------------------------------------------------------------------------------
# ForwardedAccessIntent: the child-fixed facts (`docs/design/contract.md` § Facts and judgment)


class Principal(WireModel):
    session_id: str
    agent_name: str


def _read_asking_units(value: object) -> tuple[AskingUnit, ...]:
    """`askingUnits` as `core.wire.facts.AskingUnit` values: a non-empty array of `{command, floor?}`
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


class ForwardedAccessIntent(WireModel):
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

    _floor_not_null = field_validator("floor", mode="before")(reject_null)

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


class SessionGrant(WireModel):
    """One (surface, pattern) of the child's `sessionApproval` suggestion. Not yet a grant of this node:
    that is `core.rules.session_grants.RecordedGrant`, made only when a person approves for the serving
    session."""

    surface: Annotated[str, Field(min_length=1)]
    pattern: str


class SuggestedGrants(WireModel):
    """The child's "for this session" suggestion, in either generation's shape, as (surface, pattern)."""

    shape: Literal["legacy", "grants"]
    grants: tuple[SessionGrant, ...]


class PromptRequester(WireModel):
    agent_name: str | None = None
    forwarded: bool
    session_id: str | None = None


class PromptRequest(WireModel):
    requester: PromptRequester
    surface: str
    tool_name: str | None = None
    invoked_tool_name: str | None = None
    value: str
    matched_pattern: str | None = None
    command_context: Literal["command_substitution", "process_substitution", "subshell"] | None = None
    executed_unit: str | None = None


class PromptEvidence(WireModel):
    label: str
    text: str
    detail: str | None = None


class PromptAnnotation(WireModel):
    source: str
    text: str


class PromptPayload(WireModel):
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

#: How many hops a carried ask may list, and how long each of a hop's names may be: the list is
#: untrusted provenance, read bounded (a longer list or name drops the whole list).
MAX_HOPS = 8
MAX_HOP_NAME_CHARS = 200

HopName = Annotated[str, Field(min_length=1, max_length=MAX_HOP_NAME_CHARS)]


class CarriedHop(WireModel):
    """One node a courier carried this ask through (`hops`, added by pi-authorizer's courier, never
    by a child): shown as provenance, never judged."""

    host: HopName
    session_id: HopName
    node: HopName


class ForwardedRequest(WireModel):
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
    #: The couriers this ask came through, the first being the one that read it from its child.
    hops: tuple[CarriedHop, ...] | None = None


class ParsedRequest(NamedTuple):
    """A request as read: the model, the exact bytes received and what was dropped and why (empty:
    nothing). A plain tuple: the reader makes one per ask (`tuple.__new__`: 0.15 µs, where the frozen
    dataclass it was cost 0.59 built in place)."""

    request: ForwardedRequest
    raw: bytes
    dropped: dict[str, str]

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
