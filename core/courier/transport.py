"""The courier's one seam: what a transport is given (a `Parcel`), what it returns (`Relayed`), and
how it fails (`Unreachable`). Every target (`session:ID`, `nats://HOST:PORT`) implements `Courier`;
the courier arbiter and the tests see nothing else of it, as httpx's transports hide the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from core.wire.response import ReadResponse


@dataclass(frozen=True)
class Hop:
    """One node an ask passed through on its way up: provenance shown to the person, never judged."""

    #: The host the node runs on, as that node names itself.
    host: str
    #: The session whose inbox (or broker subject) the node took the ask from.
    session_id: str
    #: The node's own name (stable across restarts: the state dir's node name).
    node: str


@dataclass(frozen=True)
class Parcel:
    """An ask on its way up. `request` is the child's request file exactly as read: never re-encoded,
    so the facts and the principal reach the adjudicating node byte for byte."""

    #: Unique for this ask across the tree and stable across a courier's restarts (the same request
    #: file carried again after a kill gets the same id, so it is never asked twice up there).
    parcel_id: str
    request: bytes
    #: The nodes it passed through, the first being the one that read it from its child.
    hops: tuple[Hop, ...]
    #: When the child gives up (ms, child clock: `createdAt` + `forwardingTimeoutMs`). A transport
    #: never waits past it.
    deadline_ms: float
    #: Its id was minted in this run, not kept from an earlier one: an answer found at the target
    #: before this node carried it there was not written for it (`core/courier/parcel_ids.py`).
    fresh: bool = False


@dataclass(frozen=True)
class Relayed:
    """The verdict of the node the ask was carried to, as read from it."""

    response: ReadResponse
    #: Who decided up there, in words for the log, the history and the app ("the person at host h").
    decided_by: str
    #: The node that decided, when the response cannot name it: a broker's approver whose signature
    #: this node verified under a trusted key.
    decider_node: str | None = None
    #: The node a verdict claims decided it, when this node could not verify that (no trust list).
    claimed_by: str | None = None


@dataclass(frozen=True)
class Carried:
    """An ask a courier carried and has not answered yet, as kept in its state dir
    (`core/courier/carried.py`): enough to withdraw its parcel and name the approver's row."""

    parcel_id: str
    #: The courier's host (the parcel's origin hop) and the session the ask came from.
    host: str
    session_id: str
    #: The request file's name in that session's inbox, and the child's request id.
    name: str
    request_id: str
    #: `parcel_digest` of the request bytes (what a withdrawal is signed for).
    digest: str


class Unreachable(Exception):
    """The target could not take or answer the parcel within the transport's bounded wait; the
    message names the target and why, and is what the courier's fallback denial tells the agent."""


class Courier(Protocol):
    """A transport to one target. `carry` is cancelled when the child withdraws its ask."""

    #: The target as the person wrote it (`session:ID`, `nats://HOST:PORT`), for messages.
    target: str

    async def carry(self, parcel: Parcel) -> Relayed:
        """Deliver the parcel and wait for its verdict; idempotent per `parcel_id` (a courier
        restarted after a kill carries the same parcel again and is given the same verdict).
        Raises `Unreachable` when the target cannot be reached or answer before the deadline."""
        ...

    async def withdraw(self, parcel_id: str, reason: str) -> Relayed | None:
        """The child withdrew, or the courier gave up waiting: withdraw the ask everywhere it was
        carried. A target where a verdict and a withdrawal race to one answer returns the verdict that
        won instead (a courier whose child is still unanswered relays it); None otherwise."""
        ...

    async def abandon(self, carried: Carried, reason: str) -> None:
        """An ask an earlier run carried whose child gave up while no courier ran (its request is
        gone): withdraw it; a verdict that won meanwhile was never delivered, and the target is told
        so where it keeps a record of its verdict."""
        ...

    async def owed(self, parcel_id: str) -> None:
        """Returns once nothing `withdraw` or `abandon` left owed for the parcel (a withdrawal the target
        could not take yet) is; raises `CancelledError` if stopped first. Until then the ask stays kept
        (`core/courier/carried.py`), so a courier killed meanwhile withdraws it at its next start."""
        ...

    async def close(self) -> None:
        """Release connections and watches; parcels in flight stay where they are."""
        ...


def decider_words(response: ReadResponse, where: str | None = None) -> str:
    """Who decided up there, in words, from the response's `decidedBy` (for `Relayed.decided_by`):
    told, never trusted (it is the other node's account). `where`: the node that decided, when the
    response's responder does not name it (a broker's approver answers as the courier's session)."""
    source = response.decided_by
    kind = source.kind if source is not None else None
    words = {
        "user": "the person",
        "rule": "a rule",
        "session_approval": "a session grant",
        "authorizer": "a chain link",
        "yolo": "yolo mode",
        "unavailable": "a fail-safe",
        "gate_error": "a gate error",
        "forwarded": "a node further up",
        "infrastructure_read": "an infrastructure read",
    }
    at = where if where is not None else repr(response.responder_session_id)
    return f"{words.get(kind or '', 'an unnamed decider')} at {at}"
