"""The person as a terminal slot: pending asks in arrival order, decided through this API only.

The TUI subscribes to `HumanAuthorizer` events and calls its decision methods; nothing here knows a
screen exists, so every decision path is tested without one. Deciding never blocks draining: the
serving core asks for a decision (`decide`), gets a future and goes on; a decision method resolves
that future with its decision value and waits for the core's `Answered` on the decision's `reply`.

Every decision a person can take is one API the app drives, kept in one room so no decision path
bypasses `_take`/`_commit`. Its events and the grant book it needs are `core.person_events`; what a
whole-session grant would record and decide is `core.person_grant_reach`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.person_events import (
    OUTCOMES,
    AskAdded,
    AskDecided,
    AskWithdrawn,
    DecisionKind,
    DecisionRefused,
    GrantBook,
    HumanEvent,
)
from core.person_grant_reach import grant_reach, grant_refusal, proven_direction, serving_grants_of
from core.rules.session import GrantRefused
from core.serving.asks import Answered, ArbiterDecision, Ask, AskKey, Decision
from core.wire.decisions import UserDecision
from core.wire.request import SessionGrant
from core.wire.response import ForwardedResponse, GrantWidth, approve, approve_for_session, deny

# The person's surface for the app: its events and refusals come from here with it.
__all__ = [
    "AskAdded",
    "AskDecided",
    "AskWithdrawn",
    "DecisionRefused",
    "GrantRefused",
    "HumanAuthorizer",
    "HumanEvent",
    "proven_direction",
]

log = logging.getLogger("pi_authorizer.human")

USER = UserDecision(via="dialog")
#: What a decision call learns when the core never said what became of it (serving ended).
UNKNOWN = Answered(False, "serving ended before what became of this decision was known")


class HumanAuthorizer:
    """Holds what reached a person; publishes added / withdrawn / decided events."""

    name = "person"

    def __init__(self, grants: GrantBook | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self._pending: dict[AskKey, Ask] = {}
        self._deciding: dict[AskKey, asyncio.Future[ArbiterDecision]] = {}
        self._listeners: list[Callable[[HumanEvent], None]] = []
        self.grants = grants

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
        response = approve(responder=ask.responder_session_id, at_ms=self._now_ms(), decided_by=USER)
        return await self._commit(ask, "approved", response)

    async def approve_for_requester_session(self, key: AskKey, width: GrantWidth = "proven") -> AskDecided:
        """`approved_for_session`: the child records its own suggestion for its session.

        `family` ("both directions", pi's `b`) is offered only when every grant proves one direction.
        """
        ask = self._take(key)
        if ask.request.session_approval is None:
            raise DecisionRefused("the child sent no session suggestion, so there is nothing to record")
        if width == "family" and proven_direction(self.serving_grants_of(ask)) is None:
            raise DecisionRefused("both directions applies only when every grant proves one direction")
        response = approve_for_session(
            responder=ask.responder_session_id, at_ms=self._now_ms(), decided_by=USER, width=width
        )
        return await self._commit(ask, "approved_for_session", response)

    def serving_grants(self, key: AskKey) -> tuple[SessionGrant, ...]:
        """The exact (surface, pattern) rules a whole-session approval would record."""
        return serving_grants_of(self._take(key))

    def serving_grant_refusal(self, key: AskKey) -> str | None:
        return grant_refusal(self._take(key), self.grants)

    def grant_reach(self, key: AskKey) -> tuple[Ask, ...]:
        """The other pending asks a whole-session grant from `key` would decide."""
        return grant_reach(self._take(key), self.grants, self._pending.values())

    async def approve_for_serving_session(self, key: AskKey) -> AskDecided:
        """Record the child's suggestion as this node's session rules, answer `approved`, then answer
        every other pending ask the grant now decides, as the serving core would had it arrived later."""
        refusal = self.serving_grant_refusal(key)
        if refusal is not None:
            raise GrantRefused(refusal)
        ask = self._take(key)
        assert self.grants is not None
        reach = self.grant_reach(key)  # what the confirmation showed, judged again at confirm time
        # Record first: a grant that cannot be recorded must not become an approval.
        self.grants.record(key.session_id, self.serving_grants_of(ask), ask.request.requester_agent_name)
        decided = await self._commit(
            ask,
            "approved_for_serving_session",
            approve(responder=ask.responder_session_id, at_ms=self._now_ms(), decided_by=USER),
        )
        return dataclasses.replace(decided, also=await self._decide_by_grant(key, reach))

    async def _decide_by_grant(self, granted_on: AskKey, reach: Sequence[Ask]) -> tuple[AskDecided, ...]:
        """Answer each ask of `reach` still pending that this node's rules now allow (thanks to the grant)."""
        assert self.grants is not None
        also: list[AskDecided] = []
        for other in reach:
            if self._pending.get(other.key) is not other:
                continue
            judgment = self.grants.judge(other.parsed, granted_on.session_id)
            if judgment.verdict != "allow":
                continue
            response = approve(responder=other.responder_session_id, at_ms=self._now_ms(),
                               decided_by=judgment.decided_by)
            try:
                also.append(await self._commit(other, "approved_by_serving_grant", response, granted_on))
            except DecisionRefused as exc:  # gone meanwhile, or a failed write: it stays or leaves
                log.warning("grant decision of %s not written: %s", other.key.name, exc)
        return tuple(also)

    async def deny(self, key: AskKey, reason: str | None = None) -> AskDecided:
        ask = self._take(key)
        if reason is not None and not reason.strip():
            raise DecisionRefused("A reason is required.")
        response = deny(
            responder=ask.responder_session_id, at_ms=self._now_ms(), decided_by=USER, reason=reason
        )
        return await self._commit(ask, response.state, response)

    # -- the terminal-slot side ---------------------------------------------------------------

    def decide(self, ask: Ask) -> asyncio.Future[ArbiterDecision]:
        """Resolved by the person's decision; asked again for the same ask after its decision could not be
        written (it stays in its place, not added twice)."""
        future: asyncio.Future[ArbiterDecision] = asyncio.get_running_loop().create_future()
        self._deciding[ask.key] = future
        if self._pending.get(ask.key) is not ask:
            self._pending[ask.key] = ask
            self._emit(AskAdded(ask))
        return future

    def withdraw(self, key: AskKey) -> None:
        deciding = self._deciding.pop(key, None)
        if deciding is not None:
            deciding.cancel()
        ask = self._pending.pop(key, None)
        if ask is not None:
            self._emit(AskWithdrawn(ask))

    # -- internals ------------------------------------------------------------------------------

    @staticmethod
    def serving_grants_of(ask: Ask) -> tuple[SessionGrant, ...]:
        return serving_grants_of(ask)

    def _now_ms(self) -> int:
        return wall_ms(self.clock)

    def awaiting(self, key: AskKey) -> bool:
        """A decision on it is awaited (not answered, withdrawn, nor being answered)."""
        deciding = self._deciding.get(key)
        return key in self._pending and deciding is not None and not deciding.done()

    def _take(self, key: AskKey) -> Ask:
        """The ask, if a decision on it is awaited."""
        if not self.awaiting(key):
            raise DecisionRefused("this ask is no longer pending (answered or withdrawn by the child)")
        return self._pending[key]

    async def _commit(
        self, ask: Ask, kind: DecisionKind, response: ForwardedResponse, granted_on: AskKey | None = None
    ) -> AskDecided:
        """Hand the decision to the serving core (once) and wait for what became of it.

        The queue learns what became of it when the core says so, whether or not this call is still
        waiting (a caller cancelled meanwhile leaves no ask behind that can no longer be decided)."""
        self._take(ask.key)
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Answered] = loop.create_future()
        outcome: asyncio.Future[AskDecided] = loop.create_future()
        reply.add_done_callback(lambda done: self._settled(ask, kind, response, granted_on, done, outcome))
        self._deciding.pop(ask.key).set_result(Decision(response, OUTCOMES.get(kind, "user"), reply))
        return await asyncio.shield(outcome)

    def _settled(
        self,
        ask: Ask,
        kind: DecisionKind,
        response: ForwardedResponse,
        granted_on: AskKey | None,
        reply: asyncio.Future[Answered],
        outcome: asyncio.Future[AskDecided],
    ) -> None:
        """Apply what became of a decision to the queue. Only this very ask leaves it: a new ask under
        the same name (its file replaced and served anew) may already stand in its place."""
        result = UNKNOWN if reply.cancelled() else reply.result()
        mine = self._pending.get(ask.key) is ask
        if not result.written:
            if result.gone and mine:
                del self._pending[ask.key]
                self._emit(AskWithdrawn(ask))
            # A failed write leaves the ask pending, in its place in the queue.
            outcome.set_exception(DecisionRefused(result.why_not or "the answer could not be written"))
            outcome.exception()  # retrieved: a caller cancelled meanwhile has nothing to be told
            return
        if mine:
            del self._pending[ask.key]
        decided = AskDecided(ask=ask, kind=kind, response=response, decided_at=self.clock.wall(),
                             granted_on=granted_on)
        self._emit(decided)
        outcome.set_result(decided)

    def _emit(self, event: HumanEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("listener failed on %s", type(event).__name__)
