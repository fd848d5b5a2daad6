"""The response: the strict writer, and a child's reader to verify what is on disk.

Writing follows the strictest reader we know of: only the four on-wire states, `approved` agreeing
with `state`, compact JSON with no trailing newline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import model_validator

from core.wire.base import WireModel, compact_json, strict_json_loads
from core.wire.decisions import DecisionSource, decision_source_json, read_decision_source

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
