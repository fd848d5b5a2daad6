"""The response: the strict writer, and a child's reader to verify what is on disk.

Writing follows the strictest reader we know of: only the four on-wire states, `approved` agreeing
with `state`, compact JSON with no trailing newline.
"""

from __future__ import annotations

from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Literal, get_args

from pydantic import model_validator

from core.wire.base import WireModel, compact_json, strict_json_loads
from core.wire.decisions import (
    DecisionSource,
    decision_source_json,
    decision_source_text,
    read_decision_source,
)

WireState = Literal["approved", "approved_for_session", "denied", "denied_with_reason"]
ReadableState = Literal[
    "approved", "approved_for_session", "approved_for_serving_session", "denied", "denied_with_reason"
]
GrantWidth = Literal["proven", "family"]
_APPROVING: frozenset[str] = frozenset({"approved", "approved_for_session"})


class ForwardedResponse(WireModel):
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


#: The response's opening per state (`approved` follows from the state: the model refuses a
#: contradiction), as `compact_json(response_json(...))` writes it.
_WIDTHS: frozenset[object] = frozenset(get_args(GrantWidth))
_OPENINGS: dict[object, str] = {
    state: f'{{"approved":{"true" if state in _APPROVING else "false"},"state":"{state}"'
    for state in ("approved", "approved_for_session", "denied", "denied_with_reason")
}


def encode_response(response: ForwardedResponse) -> bytes:
    """`compact_json(response_json(response))`, byte for byte, written from pre-made pieces (every
    ask's response and its history row write one; `tests/wire/test_fast_encoder.py`). Text UTF-8
    cannot hold (a lone surrogate), or a value of a type validation would not have let in, is
    written the general way."""
    text = _response_text(response)
    if text is not None:
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            pass
    return compact_json(response_json(response))


def _response_text(response: ForwardedResponse) -> str | None:
    opening, reason = _OPENINGS.get(response.state), response.denial_reason
    responder, at = response.responder_session_id, response.responded_at
    decided, width = response.decided_by, response.session_grant_width

    if opening is None or type(responder) is not str or type(at) is not int:
        return None
    text = opening
    if reason is not None:
        if type(reason) is not str:
            return None
        text += ',"denialReason":' + encode_basestring(reason)
    text += f',"responderSessionId":{encode_basestring(responder)},"respondedAt":{at}'
    if decided is not None:
        decided_text = decision_source_text(decided)
        if decided_text is None:
            return None
        text += ',"decidedBy":' + decided_text
    if width is not None:
        if width not in _WIDTHS:
            return None
        text += f',"sessionGrantWidth":"{width}"'
    return text + "}"


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
        obj = strict_json_loads(data.decode("utf-8"))
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
