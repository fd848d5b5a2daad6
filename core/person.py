"""The person as the arbiter: the asks that reached a person, in arrival order, decided through this
API only.

The TUI subscribes to `Person` events and calls its decision methods; nothing here knows a
screen exists, so every decision path is tested without one. Deciding never blocks draining: the
serving core asks for a decision (`decide`), gets a future and goes on; a decision method resolves
that future with its decision value and waits for the core's `Answered` on the decision's `reply`.

One room for everything a person's decision touches, so no decision path bypasses `_take`/`_commit`:
the events the person publishes (an ask added, withdrawn, decided) and the history outcome of each
kind of decision; `DecisionRefused`, what a decision method raises; the book of serving-session
grants it records into (`GrantBook`); and a whole-session grant's reach (what it would record, why
it is refused, which other pending asks it would decide at once), asked before a grant is confirmed;
the confirmation then decides exactly the asks it listed (`R`'s written rule likewise, `rule_reach`).
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Literal, Protocol

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.rules.model import DIRECTIONAL_SURFACES
from core.rules.session_grants import GrantRefused
from core.vocabulary.asks import Answered, ArbiterDecision, Ask, AskKey, Decision, Judgment
from core.wire.decisions import UserDecision
from core.wire.request import ParsedRequest, SessionGrant
from core.wire.response import ForwardedResponse, GrantWidth, approve, approve_for_session, deny

# `GrantRefused` (the rules' word) is raised by `approve_for_serving_session`: the app catches it from
# here, beside the person's own refusal.
__all__ = [
    "CHANGED_SINCE_SHOWN",
    "NO_FACTS_GRANT",
    "OUTCOMES",
    "AskAdded",
    "AskDecided",
    "AskWithdrawn",
    "DecisionKind",
    "DecisionRefused",
    "GrantBook",
    "GrantRefused",
    "Person",
    "PersonEvent",
    "grant_reach",
    "grant_refusal",
    "proven_direction",
    "rule_reach",
    "serving_grants_of",
]


log = logging.getLogger("pi_authorizer.person")


# -- what the person tells its listeners, and what it needs -------------------------------------

DecisionKind = Literal[
    "approved",
    "approved_for_session",
    "approved_for_serving_session",
    "approved_by_serving_grant",
    "approved_by_written_rule",
    "denied",
    "denied_with_reason",
]
#: The history's `outcome` for each kind (default `user`): `w` and the asks its grant decided differ
#: from a plain `y`, whose response is the same `approved`.
OUTCOMES: dict[str, str] = {
    "approved_for_serving_session": "user_grant",
    "approved_by_serving_grant": "session_grant",
    "approved_by_written_rule": "rule_written",
}


@dataclass(frozen=True)
class AskAdded:
    ask: Ask


@dataclass(frozen=True)
class AskWithdrawn:
    """The child gave up (timeout or abandon), or `reason` says who else answered it: the ask can no
    longer be answered by this node."""

    ask: Ask
    reason: str | None = None


@dataclass(frozen=True)
class AskDecided:
    """`granted_on` names the ask whose whole-session grant decided this one (kind `..._by_serving_grant`);
    `also`, on the grant's own decision, the other pending asks that grant decided at once."""

    ask: Ask
    kind: DecisionKind
    response: ForwardedResponse
    decided_at: float
    granted_on: AskKey | None = None
    also: tuple[AskDecided, ...] = ()
    #: The size of the batch this decision was part of (0: decided alone). The wire has no batch
    #: `decidedBy` a child accepts, so the response says `user`/`dialog` as for a single decision.
    batch: int = 0


PersonEvent = AskAdded | AskWithdrawn | AskDecided


class DecisionRefused(Exception):
    """The decision cannot be taken for this ask (gone, changed since shown, no suggestion, no reason...)."""


#: Why a decision on an ask the person saw is refused when another ask now stands under its name.
CHANGED_SINCE_SHOWN = ("this ask changed since it was shown (its child withdrew it and wrote another under "
                       "the same id): nothing was decided; look at the new one")


class GrantBook(Protocol):
    """This node's serving-session grants (recorded authority for later forwards)."""

    def refusal(self, agent_name: str, grants: Sequence[SessionGrant]) -> str | None:
        """Why recording these grants must be refused (the deny they would shadow), or None."""

    def record(self, session_id: str, grants: Sequence[SessionGrant], agent_name: str) -> None:
        """Record all grants or none (raises `GrantRefused`)."""

    def judge(
        self, parsed: ParsedRequest, session_id: str, extra: Sequence[SessionGrant] = (),
        preview: bool = False, written: tuple[Path, str] | None = None,
    ) -> Judgment:
        """This node's verdict on `parsed`, as if `extra` grants were recorded for `session_id` too,
        or as if the config file `written[0]` held the text `written[1]` (`preview`: a what-if, not
        a decision)."""


# -- a whole-session grant's reach ------------------------------------------------------------

NO_FACTS_GRANT = (
    "a whole-session grant cannot apply to asks without facts: this node's rules never judge such an "
    "ask (it always goes to a person), so the grant could never match anything"
)


def serving_grants_of(ask: Ask) -> tuple[SessionGrant, ...]:
    """The exact (surface, pattern) rules a whole-session approval of `ask` would record."""
    suggestion = ask.request.session_approval
    return () if suggestion is None else suggestion.grants


def grant_refusal(ask: Ask, book: GrantBook | None) -> str | None:
    """Why a whole-session grant from `ask` cannot be recorded, or None."""
    grants = serving_grants_of(ask)
    if not ask.has_facts:
        return NO_FACTS_GRANT
    if not grants:
        return "the child sent no session suggestion, so there is no grant to record"
    if book is None:
        return "this authorizer keeps no serving-session grants"
    return book.refusal(ask.request.requester_agent_name, grants)


def grant_reach(ask: Ask, book: GrantBook | None, pending: Iterable[Ask]) -> tuple[Ask, ...]:
    """The other `pending` asks a whole-session grant from `ask` would decide (shown before confirming).

    Same served session, with facts, asking now, and allowed once the grant is recorded.
    """
    key: AskKey = ask.key
    grants = serving_grants_of(ask)
    if book is None or not grants:
        return ()
    return tuple(
        other for other in pending
        if other.key != key and other.key.session_id == key.session_id and other.has_facts
        and book.judge(other.parsed, key.session_id, preview=True).verdict == "ask"
        and book.judge(other.parsed, key.session_id, grants, preview=True).verdict == "allow"
    )


def rule_reach(book: GrantBook | None, pending: Iterable[Ask], written: tuple[Path, str]) -> tuple[Ask, ...]:
    """The `pending` asks a rule written into a config file would decide now (`R`'s dialog lists them):
    with facts, asking now, and allowed once the file holds `written[1]`. The ask the rule came from
    is one of them."""
    if book is None:
        return ()
    return tuple(
        ask for ask in pending
        if ask.has_facts
        and book.judge(ask.parsed, ask.key.session_id, preview=True).verdict == "ask"
        and book.judge(ask.parsed, ask.key.session_id, preview=True, written=written).verdict == "allow"
    )


def proven_direction(grants: Sequence[SessionGrant]) -> str | None:
    """`read` or `write` when every grant is on a directional surface of that one direction, else None
    (pi's `provenDirectionOf`: only then is "both directions" a different width)."""
    directions = {g.surface.rsplit("_", 1)[-1] for g in grants if g.surface in DIRECTIONAL_SURFACES}
    if not grants or len(directions) != 1 or any(g.surface not in DIRECTIONAL_SURFACES for g in grants):
        return None
    return directions.pop()


# -- the person -------------------------------------------------------------------------------

USER = UserDecision(via="dialog")
#: What a decision call learns when the core never said what became of it (serving ended).
UNKNOWN = Answered(False, "serving ended before what became of this decision was known")


_Entry = tuple[float, float, int, AskKey, Ask]
_ASK = itemgetter(4)


class Person:
    """Holds what reached a person; publishes added / withdrawn / decided events."""

    name = "person"

    def __init__(self, grants: GrantBook | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self._pending: dict[AskKey, Ask] = {}
        #: The pending asks kept in queue order as they come and go (a refresh never sorts them all):
        #: each entry is (createdAt, arrival, the key's first-come number, key, ask: never compared, the
        #: number is unique); `_ordered` is the asks in that order, made again only after a change.
        self._order: list[_Entry] = []
        self._entry: dict[AskKey, _Entry] = {}
        self._seq = itertools.count()
        self._ordered: tuple[Ask, ...] | None = ()
        self._deciding: dict[AskKey, asyncio.Future[ArbiterDecision]] = {}
        self._listeners: list[Callable[[PersonEvent], None]] = []
        self.grants = grants

    # -- the seam the TUI uses --------------------------------------------------------------

    def subscribe(self, listener: Callable[[PersonEvent], None]) -> None:
        self._listeners.append(listener)

    def pending(self) -> list[Ask]:
        """In the children's `createdAt` order, then arrival: an ask from an inbox adopted late joins the
        queue where it was created, not at the end. (A screen keeps its cursor on the same ask.)"""
        return list(self.ordered())

    def ordered(self) -> tuple[Ask, ...]:
        """`pending()` without a copy: the same tuple until an ask comes or goes (kept in order as
        they do, so thousands pending are never sorted again on a refresh)."""
        if self._ordered is None:
            self._ordered = tuple(map(_ASK, self._order))  # no key hashed: thousands in one C loop
        return self._ordered

    def count(self) -> int:
        return len(self._pending)

    def _hold(self, ask: Ask) -> None:
        """`ask` pending under its key, at its place in the order (a key already pending keeps its
        first-come number, as a dictionary keeps its place: the order is what sorting would give)."""
        key = ask.key
        old = self._entry.pop(key, None)
        if old is not None:
            self._unorder(old)
        seq = next(self._seq) if old is None else old[2]
        entry = (ask.request.created_at, ask.arrived_at, seq, key, ask)
        bisect.insort(self._order, entry)
        self._entry[key] = entry
        self._pending[key] = ask
        self._ordered = None

    def _release(self, key: AskKey) -> Ask | None:
        """The ask pending under `key` taken out of the queue (None: none was)."""
        ask = self._pending.pop(key, None)
        entry = self._entry.pop(key, None)
        if entry is not None:
            self._unorder(entry)
            self._ordered = None
        return ask

    def _unorder(self, entry: _Entry) -> None:
        at = bisect.bisect_left(self._order, entry)
        if at < len(self._order) and self._order[at] is entry:
            del self._order[at]
        else:  # a time that orders nothing (NaN): found by identity
            del self._order[next(i for i, e in enumerate(self._order) if e is entry)]

    def get(self, key: AskKey) -> Ask | None:
        return self._pending.get(key)

    async def approve_once(self, key: AskKey, *, shown: Ask | None = None, batch: int = 0) -> AskDecided:
        """`shown`, on every decision method: the very ask the person saw; refused (`CHANGED_SINCE_SHOWN`)
        when another ask now stands under its name. `batch`: the size of the batch it is part of."""
        ask = self._take(key, shown)
        response = approve(responder=ask.responder_session_id, at_ms=self._now_ms(), decided_by=USER)
        return await self._commit(ask, "approved", response, batch=batch)

    async def approve_for_requester_session(self, key: AskKey, width: GrantWidth = "proven", *,
                                            shown: Ask | None = None) -> AskDecided:
        """`approved_for_session`: the child records its own suggestion for its session.

        `family` ("both directions", pi's `b`) is offered only when every grant proves one direction.
        """
        ask = self._take(key, shown)
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
        """On the calling thread: composes one policy per agent file. On the loop use
        `check_serving_grant`."""
        return grant_refusal(self._take(key), self.grants)

    async def check_serving_grant(self, key: AskKey) -> str | None:
        """Why a whole-session grant from `key` would be refused, or None, worked out off the event
        loop: with thousands of agent files the check composes thousands of policies (seconds),
        while serving (the same loop) keeps answering. Remembered by the rules until a file
        changes, so the check at confirm time is quick."""
        ask = self._take(key)
        return await asyncio.to_thread(grant_refusal, ask, self.grants)

    def grant_reach(self, key: AskKey) -> tuple[Ask, ...]:
        """The other pending asks a whole-session grant from `key` would decide."""
        return grant_reach(self._take(key), self.grants, self._pending.values())

    def rule_reach(self, path: Path, text: str) -> tuple[Ask, ...]:
        """The pending asks a rule would decide once `text` is written into the config file `path`."""
        return rule_reach(self.grants, self.ordered(), (path, text))

    async def approve_for_serving_session(self, key: AskKey, *, shown: Ask | None = None,
                                          reach: Sequence[Ask]) -> AskDecided:
        """Record the child's suggestion as this node's session rules, answer `approved`, then answer
        the other asks of `reach` (exactly those the confirmation listed, never re-derived here) that
        the grant now decides, as the serving core would had they arrived later. An ask that arrived
        after the confirmation was painted is not in `reach`: it waits for the person."""
        self._take(key, shown)
        refusal = await self.check_serving_grant(key)
        self._take(key, shown)  # still pending, still the ask shown, after the check
        if refusal is not None:
            raise GrantRefused(refusal)
        ask = self._take(key)
        assert self.grants is not None
        # Record first: a grant that cannot be recorded must not become an approval.
        self.grants.record(key.session_id, self.serving_grants_of(ask), ask.request.requester_agent_name)
        decided = await self._commit(
            ask,
            "approved_for_serving_session",
            approve(responder=ask.responder_session_id, at_ms=self._now_ms(), decided_by=USER),
        )
        others = [other for other in reach if other.key != key]
        return dataclasses.replace(
            decided, also=await self._decide_by_rules(others, "approved_by_serving_grant", key))

    async def approve_by_written_rule(self, reach: Sequence[Ask]) -> tuple[AskDecided, ...]:
        """After a rule the person confirmed was written (`R`): answer the asks of `reach` (exactly
        those its dialog listed) that this node's rules now allow. An ask that arrived after the
        dialog was painted is not in `reach`: it waits for the person."""
        return await self._decide_by_rules(reach, "approved_by_written_rule")

    async def _decide_by_rules(self, reach: Sequence[Ask], kind: DecisionKind,
                               granted_on: AskKey | None = None) -> tuple[AskDecided, ...]:
        """Answer each ask of `reach` still pending (the very `Ask` listed, not another under its name)
        that this node's rules now allow, as the serving core would had it arrived now; the rest
        stay for the person."""
        if self.grants is None:
            return ()
        also: list[AskDecided] = []
        for other in reach:
            if self._pending.get(other.key) is not other or not self.awaiting(other.key):
                continue
            judgment = self.grants.judge(other.parsed, other.key.session_id)
            if judgment.verdict != "allow":
                continue
            response = approve(responder=other.responder_session_id, at_ms=self._now_ms(),
                               decided_by=judgment.decided_by)
            try:
                also.append(await self._commit(other, kind, response, granted_on))
            except DecisionRefused as exc:  # gone meanwhile, or a failed write: it stays or leaves
                log.warning("decision of %s by %s not written: %s", other.key.name, kind, exc)
        return tuple(also)

    async def deny(self, key: AskKey, reason: str | None = None, *, shown: Ask | None = None,
                   batch: int = 0) -> AskDecided:
        ask = self._take(key, shown)
        if reason is not None and not reason.strip():
            raise DecisionRefused("A reason is required.")
        response = deny(
            responder=ask.responder_session_id, at_ms=self._now_ms(), decided_by=USER, reason=reason
        )
        return await self._commit(ask, response.state, response, batch=batch)

    # -- the arbiter side (the route asks, withdraws) ----------------------------------------------

    def decide(self, ask: Ask) -> asyncio.Future[ArbiterDecision]:
        """Resolved by the person's decision; asked again for the same ask after its decision could not be
        written (it stays in its place, not added twice)."""
        future: asyncio.Future[ArbiterDecision] = asyncio.get_running_loop().create_future()
        self._deciding[ask.key] = future
        if self._pending.get(ask.key) is not ask:
            self._hold(ask)
            self._emit(AskAdded(ask))
        return future

    def withdraw(self, key: AskKey, reason: str | None = None) -> None:
        deciding = self._deciding.pop(key, None)
        if deciding is not None:
            deciding.cancel()
        ask = self._release(key)
        if ask is not None:
            self._emit(AskWithdrawn(ask, reason))

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

    def _take(self, key: AskKey, shown: Ask | None = None) -> Ask:
        """The ask, if a decision on it is awaited (and it is the very ask `shown`, when given)."""
        if not self.awaiting(key):
            raise DecisionRefused("this ask is no longer pending (answered or withdrawn by the child)")
        ask = self._pending[key]
        if shown is not None and ask is not shown:
            raise DecisionRefused(CHANGED_SINCE_SHOWN)
        return ask

    async def _commit(
        self, ask: Ask, kind: DecisionKind, response: ForwardedResponse, granted_on: AskKey | None = None,
        *, batch: int = 0,
    ) -> AskDecided:
        """Hand the decision to the serving core (once) and wait for what became of it.

        The queue learns what became of it when the core says so, whether or not this call is still
        waiting (a caller cancelled meanwhile leaves no ask behind that can no longer be decided)."""
        self._take(ask.key)
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Answered] = loop.create_future()
        outcome: asyncio.Future[AskDecided] = loop.create_future()
        reply.add_done_callback(
            lambda done: self._settled(ask, kind, response, granted_on, done, outcome, batch))
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
        batch: int = 0,
    ) -> None:
        """Apply what became of a decision to the queue. Only this very ask leaves it: a new ask under
        the same name (its file replaced and served anew) may already stand in its place."""
        result = UNKNOWN if reply.cancelled() else reply.result()
        mine = self._pending.get(ask.key) is ask
        if not result.written and result.waiting:
            # Decided and recorded; the disk refused it for now: it is written once the disk allows.
            if mine:
                self._release(ask.key)
            self._emit(AskDecided(ask=ask, kind=kind, response=response, decided_at=self.clock.wall(),
                                  granted_on=granted_on))
            outcome.set_exception(DecisionRefused(result.why_not or "waiting for disk"))
            outcome.exception()
            return
        if not result.written:
            if result.gone and mine:
                self._release(ask.key)
                self._emit(AskWithdrawn(ask, result.elsewhere))
            # A failed write leaves the ask pending, in its place in the queue.
            outcome.set_exception(DecisionRefused(result.why_not or "the answer could not be written"))
            outcome.exception()  # retrieved: a caller cancelled meanwhile has nothing to be told
            return
        if mine:
            self._release(ask.key)
        decided = AskDecided(ask=ask, kind=kind, response=response, decided_at=self.clock.wall(),
                             granted_on=granted_on, batch=batch)
        self._emit(decided)
        outcome.set_result(decided)

    def _emit(self, event: PersonEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("listener failed on %s", type(event).__name__)
