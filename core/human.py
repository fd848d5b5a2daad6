"""The person as a terminal slot: pending asks in arrival order, decided through this API only.

The TUI subscribes to `HumanAuthorizer` events and calls its decision methods; nothing here knows a
screen exists, so every decision path is tested without one. Deciding never blocks draining: the
serving core hands asks over and goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from core.asks import Answered, Ask, AskKey
from core.wire import ForwardedResponse, SessionGrant, UserDecision, approve, approve_for_session, deny

log = logging.getLogger("pi_authorizer.human")

USER = UserDecision(via="dialog")
DecisionKind = Literal[
    "approved", "approved_for_session", "approved_for_serving_session", "denied", "denied_with_reason"
]


@dataclass(frozen=True)
class AskAdded:
    ask: Ask


@dataclass(frozen=True)
class AskWithdrawn:
    """The child gave up (timeout or abandon): the ask can no longer be answered."""

    ask: Ask


@dataclass(frozen=True)
class AskDecided:
    ask: Ask
    kind: DecisionKind
    response: ForwardedResponse
    decided_at: float


HumanEvent = AskAdded | AskWithdrawn | AskDecided


class GrantRefused(Exception):
    """A whole-serving-session grant that would shadow an explicit deny of this node's config."""


class DecisionRefused(Exception):
    """The decision cannot be taken for this ask (gone, no suggestion, blank reason...)."""


class GrantBook(Protocol):
    """This node's serving-session grants (recorded authority for later forwards)."""

    def refusal(self, agent_name: str, grants: Sequence[SessionGrant]) -> str | None:
        """Why recording these grants must be refused (the deny they would shadow), or None."""

    def record(self, session_id: str, grants: Sequence[SessionGrant], agent_name: str) -> None:
        """Record all grants or none (raises `GrantRefused`)."""


class HumanAuthorizer:
    """Holds what reached a person; publishes added / withdrawn / decided events."""

    name = "person"

    def __init__(self, grants: GrantBook | None = None) -> None:
        self._pending: dict[AskKey, Ask] = {}
        self._listeners: list[Callable[[HumanEvent], None]] = []
        self.grants = grants
        self.decided: list[AskDecided] = []

    # -- the seam the TUI uses --------------------------------------------------------------

    def subscribe(self, listener: Callable[[HumanEvent], None]) -> None:
        self._listeners.append(listener)

    def pending(self) -> list[Ask]:
        """In the children's `createdAt` order, then arrival: an ask from an inbox adopted late joins the
        queue where it was created, not at the end. (A screen keeps its cursor on the same ask.)"""
        return sorted(self._pending.values(), key=lambda a: (a.request.created_at, a.arrived_at))

    def get(self, key: AskKey) -> Ask | None:
        return self._pending.get(key)

    async def approve_once(self, key: AskKey) -> AskDecided:
        ask = self._take(key)
        return await self._commit(
            ask, "approved", approve(responder=ask.responder_session_id, at_ms=_now_ms(), decided_by=USER)
        )

    async def approve_for_requester_session(self, key: AskKey) -> AskDecided:
        """`approved_for_session`: the child records its own suggestion for its session."""
        ask = self._take(key)
        if ask.request.session_approval is None:
            raise DecisionRefused("the child sent no session suggestion, so there is nothing to record")
        response = approve_for_session(
            responder=ask.responder_session_id, at_ms=_now_ms(), decided_by=USER, width="proven"
        )
        return await self._commit(ask, "approved_for_session", response)

    def serving_grants(self, key: AskKey) -> tuple[SessionGrant, ...]:
        """The exact (surface, pattern) rules a whole-session approval would record."""
        return self.serving_grants_of(self._take(key))

    def serving_grant_refusal(self, key: AskKey) -> str | None:
        ask = self._take(key)
        grants = self.serving_grants(key)
        if not grants:
            return "the child sent no session suggestion, so there is no grant to record"
        if self.grants is None:
            return "this authorizer keeps no serving-session grants"
        return self.grants.refusal(ask.request.requester_agent_name, grants)

    async def approve_for_serving_session(self, key: AskKey) -> AskDecided:
        """Record the child's suggestion as this node's session rules, then answer `approved`."""
        refusal = self.serving_grant_refusal(key)
        if refusal is not None:
            raise GrantRefused(refusal)
        ask = self._take(key)
        assert self.grants is not None
        # Record first: a grant that cannot be recorded must not become an approval.
        self.grants.record(key.session_id, self.serving_grants_of(ask), ask.request.requester_agent_name)
        return await self._commit(
            ask,
            "approved_for_serving_session",
            approve(responder=ask.responder_session_id, at_ms=_now_ms(), decided_by=USER),
        )

    async def deny(self, key: AskKey, reason: str | None = None) -> AskDecided:
        ask = self._take(key)
        if reason is not None and not reason.strip():
            raise DecisionRefused("A reason is required.")
        response = deny(responder=ask.responder_session_id, at_ms=_now_ms(), decided_by=USER, reason=reason)
        return await self._commit(ask, response.state, response)

    # -- the terminal-slot side ---------------------------------------------------------------

    async def receive(self, ask: Ask) -> None:
        self._pending[ask.key] = ask
        self._emit(AskAdded(ask))

    def withdraw(self, key: AskKey) -> None:
        ask = self._pending.pop(key, None)
        if ask is not None:
            self._emit(AskWithdrawn(ask))

    # -- internals ------------------------------------------------------------------------------

    @staticmethod
    def serving_grants_of(ask: Ask) -> tuple[SessionGrant, ...]:
        suggestion = ask.request.session_approval
        return () if suggestion is None else suggestion.grants

    def _take(self, key: AskKey) -> Ask:
        ask = self._pending.get(key)
        if ask is None or ask.withdrawn:
            raise DecisionRefused("this ask is no longer pending (answered or withdrawn by the child)")
        return ask

    async def _commit(self, ask: Ask, kind: DecisionKind, response: ForwardedResponse) -> AskDecided:
        result: Answered = await ask.answer(response, "user")
        if not result.written:
            if result.gone and self._pending.pop(ask.key, None) is not None:
                self._emit(AskWithdrawn(ask))
            # A failed write leaves the ask pending, in its place in the queue.
            raise DecisionRefused(result.why_not or "the answer could not be written")
        self._pending.pop(ask.key, None)
        decided = AskDecided(ask=ask, kind=kind, response=response, decided_at=time.time())
        self.decided.append(decided)
        self._emit(decided)
        return decided

    def _emit(self, event: HumanEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("listener failed on %s", type(event).__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
