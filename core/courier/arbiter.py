"""The courier as this node's arbiter: an ask this node's rules leave undecided is carried to the
target unchanged and the target's verdict is answered as this node's.

The response is this node's (its served session answers), saying what the target said: approved,
approved for the session (the child records its own suggestion, which the person up there saw),
or denied with the target's reason; `decidedBy` wraps the target's as `forwarded` (provenance across
the hop, capped at the wire's depth). When the target cannot be reached or does not answer before the
child's deadline (less a margin to write the answer in), the fallback applies: a denial that names the
target and why, leaving the ask for another authorizer, or another arbiter of this node (in the app:
the person here decides what the target cannot).

A parcel's id is random, minted by this node and kept by the ask's identity (session, file name,
request id, `createdAt`, its bytes: `core/courier/parcel_ids.py`), so no child can compute it, and a
courier restarted after a kill carries the same file under the same id and reads the verdict given
already. The target's answer is removed only once this node's answer is written.

An ask carried and not yet answered is kept in the state dir (`core/courier/carried.py`): a courier
killed while its child waited, whose child gave up before the restart, withdraws the parcel at its
next start (`resume`), and a verdict that won meanwhile is noted there as not delivered. So does one
killed or stopped after its fallback answered while the withdrawal was still owed (`Courier.owed`):
the ask stays kept until the withdrawal is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import Any, Literal

from core.clock import Clock, wall_ms
from core.courier.carried import CarriedAsks, carried_of
from core.courier.parcel_ids import Minted, ParcelIds, ask_identity
from core.courier.signing import parcel_digest
from core.courier.transport import Carried, Courier, Hop, Parcel, Relayed, Unreachable
from core.text import log_safe
from core.vocabulary.asks import LEAVE, Answered, Arbiter, ArbiterDecision, Ask, AskKey, Decision
from core.wire.decisions import MAX_DECISION_DEPTH, DecisionSource, ForwardedDecision, UnavailableDecision
from core.wire.request import MAX_HOPS
from core.wire.response import ForwardedResponse, approve, approve_for_session, deny

log = logging.getLogger("pi_authorizer.courier")

#: How long before the child's deadline the courier stops waiting, to write its fallback in time.
DEADLINE_MARGIN_MS = 2_000

#: `--on-ask deny|leave`, or an arbiter of this node deciding instead (the person, in the app).
Fallback = Literal["deny", "leave"] | Arbiter


@dataclass
class _Carry:
    task: asyncio.Task[None]
    future: asyncio.Future[ArbiterDecision]
    #: Known once minted (off the loop): before that nothing was carried anywhere.
    parcel_id: str | None = None


class CourierArbiter:
    """An `Arbiter` that carries asks to `courier.target` and relays its verdicts."""

    name = "courier"

    def __init__(self, courier: Courier, fallback: Fallback, clock: Clock, *, host: str, node: str,
                 ids: ParcelIds | None = None, carried: CarriedAsks | None = None) -> None:
        self.courier, self.fallback, self.clock = courier, fallback, clock
        self.host, self.node = host, node
        #: Parcel ids minted and kept (in the state dir, so a restarted courier asks once).
        self.ids = ids if ids is not None else ParcelIds()
        #: Asks carried and not yet answered, kept in the state dir (for `resume` after a kill).
        self.carried = carried if carried is not None else CarriedAsks()
        #: Parcel ids this run minted or read back until `resume` is done: never an earlier run's to
        #: withdraw at start (None once it is: nothing more is remembered).
        self._this_run: set[str] | None = set()
        self._carrying: dict[AskKey, _Carry] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """Asks carried and not yet done with (their target's answer not yet removed)."""
        return len(self._carrying)

    def decide(self, ask: Ask) -> asyncio.Future[ArbiterDecision]:
        future: asyncio.Future[ArbiterDecision] = asyncio.get_running_loop().create_future()
        carry = _Carry(self._spawn(self._carry(ask, future)), future)
        self._carrying[ask.key] = carry
        return future

    def withdraw(self, key: AskKey, reason: str | None = None) -> None:
        carry = self._carrying.pop(key, None)
        if carry is None:
            return
        carry.task.cancel()
        carry.future.cancel()
        if not isinstance(self.fallback, str):
            self.fallback.withdraw(key, reason)
        if carry.parcel_id is not None:
            self._spawn(self._withdraw(carry.parcel_id, reason or "the child withdrew its ask"))

    async def run_until(self, stop: asyncio.Event) -> None:
        """Beside serving (`ServingCore.add_background`): an earlier run's asks resumed, then closed
        when serving stops."""
        await self.resume()
        await stop.wait()
        await self.close()

    async def resume(self) -> None:
        """The asks an earlier run carried and never answered, whose request is gone (the child gave up
        while no courier ran, reading nothing from this node): withdrawn at the target, a verdict that
        won there noted as not delivered (`Courier.abandon`). One whose request is still there is
        served again (the same parcel id, the same verdict)."""
        try:
            for carried in await asyncio.to_thread(self.carried.kept):
                await self._resume_one(carried)
        finally:
            self._this_run = None

    async def _resume_one(self, carried: Carried) -> None:
        this_run = self._this_run if self._this_run is not None else set()
        if carried.parcel_id in this_run or await asyncio.to_thread(self.carried.request_present, carried):
            return
        if carried.parcel_id in this_run:  # served by this run meanwhile
            return
        try:
            await self.courier.abandon(carried, "its child was answered here or gave up before this "
                                              "courier withdrew it")
        except Exception:  # the next start tries again
            log.error("%s: withdrawing an earlier run's parcel %s at %s failed", log_safe(carried.name),
                      carried.parcel_id, log_safe(self.courier.target), exc_info=True)
            return
        self._spawn(self._done(carried.parcel_id))

    async def close(self) -> None:
        """Stop carrying (parcels in flight stay where they are) and release the transport."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.courier.close()

    async def _withdraw(self, parcel_id: str, reason: str) -> None:
        """Withdrawn where no one waits for a relay (the child withdrew, or was answered already)."""
        await self.courier.withdraw(parcel_id, reason)
        await self._done(parcel_id)

    async def _done(self, parcel_id: str) -> None:
        """The kept ask is removed once nothing is owed for it at the target: a withdrawal written
        later (the broker was out of reach) keeps it, so a courier killed or stopped before then
        withdraws it at its next start (`resume`) and a verdict that won is noted as not delivered."""
        await self.courier.owed(parcel_id)
        await asyncio.to_thread(self.carried.done, parcel_id)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _carry(self, ask: Ask, future: asyncio.Future[ArbiterDecision]) -> None:
        target = self.courier.target
        parcel_id = ""
        try:
            minted = await asyncio.to_thread(self.ids.mint, parcel_id_of(ask))
            parcel_id = minted.parcel_id
            if self._this_run is not None:
                self._this_run.add(parcel_id)
            carry = self._carrying.get(ask.key)
            if carry is not None and carry.future is future:
                carry.parcel_id = parcel_id
            decision = await self._relay(ask, minted)
        except asyncio.CancelledError:
            raise
        except Unreachable as exc:
            decision = await self._gave_up(ask, parcel_id, str(exc))
        except Exception as exc:  # a transport that fails is a target that cannot be reached
            log.error("%s: carrying to %s failed", log_safe(ask.key.name), log_safe(target), exc_info=True)
            decision = await self._gave_up(ask, parcel_id, f"carrying to {target} failed: {exc}")
        if not (isinstance(decision, Decision) and decision.outcome == "courier"):
            self._forget(ask.key, parcel_id)  # the fallback's: nothing is left at the target
        if parcel_id:  # answered: nothing is left for a restart to withdraw, once nothing is owed there
            self._spawn(self._done(parcel_id))
        if not future.done():
            future.set_result(decision)

    def _forget(self, key: AskKey, parcel_id: str) -> None:
        carry = self._carrying.get(key)
        if carry is not None and carry.parcel_id == (parcel_id or None):
            del self._carrying[key]

    async def _gave_up(self, ask: Ask, parcel_id: str, why: str) -> ArbiterDecision:
        """The target did not decide in time: the parcel is withdrawn there in the same step, so its
        one answer is the withdrawal or a verdict. A verdict that won is relayed (the child is still
        unanswered); otherwise the fallback answers."""
        won = None
        try:
            if parcel_id:  # minted: it may have been carried
                won = await self.courier.withdraw(parcel_id, f"the courier gave up: {why}")
        except Exception:  # the transport says why; the child still gets its fallback in time
            log.error("%s: withdrawing it at %s failed", log_safe(ask.key.name),
                      log_safe(self.courier.target), exc_info=True)
        if won is not None:
            return self._relayed(ask, parcel_id, won)
        return await self._fallback(ask, why)

    async def _relay(self, ask: Ask, minted: Minted) -> ArbiterDecision:
        parcel_id = minted.parcel_id
        hops = self._hops(ask)
        if isinstance(hops, str):
            return await self._fallback(ask, hops)
        deadline = ask.deadline_ms - DEADLINE_MARGIN_MS
        if wall_ms(self.clock) >= deadline:
            return await self._fallback(ask, "the child's deadline is too near to carry it")
        parcel = Parcel(parcel_id, ask.parsed.raw, hops, deadline, fresh=minted.fresh)
        kept = carried_of(parcel_id, ask.key, self.host, ask.request.id, parcel_digest(ask.parsed.raw))
        try:
            await asyncio.to_thread(self.carried.keep, kept)
        except OSError as exc:  # carried all the same: only a restart's withdrawal depends on it
            log.warning("%s: could not keep parcel %s for a restart: %s", log_safe(ask.key.name), parcel_id,
                        exc)
        relayed = await self.courier.carry(parcel)
        return self._relayed(ask, parcel_id, relayed)

    def _relayed(self, ask: Ask, parcel_id: str, relayed: Relayed) -> Decision:
        """The target's verdict, answered as this node's: the one place a relay is made."""
        target = self.courier.target
        response = relayed_response(relayed, ask.responder_session_id, wall_ms(self.clock))
        log.info("%s carried to %s: %s there by %s", log_safe(ask.key.name), log_safe(target),
                 response.state, log_safe(relayed.decided_by, 200))
        reply: asyncio.Future[Answered] = asyncio.get_running_loop().create_future()
        reply.add_done_callback(lambda done: self._settled(ask.key, parcel_id, done))
        where = f"{target} (approver {relayed.decider_node}, verified)" if relayed.decider_node else \
            f"{target} (claimed by {relayed.claimed_by}, unverified)" if relayed.claimed_by else target
        return Decision(response, "courier", reply=reply, carried_to=where)

    def _settled(self, key: AskKey, parcel_id: str, done: asyncio.Future[Answered]) -> None:
        """This node's answer is written (or the ask is gone): the target's answer is read and done
        with, and removed there as a child removes it. A write that failed keeps it for the next try."""
        answered = None if done.cancelled() else done.result()
        if answered is None or answered.written or answered.gone:
            self._forget(key, parcel_id)
            self._spawn(self._withdraw(parcel_id, "answered here"))

    def _hops(self, ask: Ask) -> tuple[Hop, ...] | str:
        """The hops the ask came with, then this node; a loop or too long a list is refused (why)."""
        came = tuple(Hop(h.host, h.session_id, h.node) for h in ask.request.hops or ())
        here = Hop(self.host, ask.key.session_id, self.node)
        if here in came:
            return f"the ask has come through this node before (a forwarding loop to {self.courier.target})"
        if len(came) + 1 > MAX_HOPS:
            return f"the ask has come through {len(came)} nodes already, the most one may"
        return (*came, here)

    async def _fallback(self, ask: Ask, why: str) -> ArbiterDecision:
        target = self.courier.target
        fallback = self.fallback
        then = {"deny": "denied", "leave": "left for another authorizer"}.get(fallback, "") \
            if isinstance(fallback, str) else f"decided here ({fallback.name})"
        log.warning("%s: could not be decided at %s: %s; %s", log_safe(ask.key.name), log_safe(target),
                    log_safe(why, 300), then)
        if not isinstance(fallback, str):
            said = f"Carried to {target}, which could not decide it: {why}. It is yours to decide here."
            judgment = replace(ask.judgment, explanation=(said, *ask.judgment.explanation))
            return await fallback.decide(replace(ask, judgment=judgment))
        if fallback == "leave":
            return LEAVE
        response = deny(
            responder=ask.responder_session_id,
            at_ms=wall_ms(self.clock),
            decided_by=UnavailableDecision(reason=f"{target} unavailable: {why}"),
            reason=f"pi-authorizer denied this for safety: it carries asks to {target} to be decided, "
                   f"and {why}",
        )
        return Decision(response, "fail-safe")


def parcel_id_of(ask: Ask) -> str:
    """What identifies this ask across restarts (the key its minted parcel id is kept under; never the
    id itself, which a child could then compute)."""
    request = ask.request
    return ask_identity(ask.key.session_id, ask.key.name, request.id, repr(request.created_at),
                        raw=ask.parsed.raw)


def relayed_response(relayed: Relayed, responder: str, at_ms: int) -> ForwardedResponse:
    """The target's verdict as this node's response: approved only when the target approved."""
    read = relayed.response
    by = _forwarded(read.responder_session_id, read.decided_by)
    if read.approved and read.state == "approved_for_session":
        return approve_for_session(responder=responder, at_ms=at_ms, decided_by=by)
    if read.approved and read.state.startswith("approved"):
        return approve(responder=responder, at_ms=at_ms, decided_by=by)
    reason = read.denial_reason if read.denial_reason and read.denial_reason.strip() else \
        f"denied at {read.responder_session_id!r} (no reason was given there)"
    return deny(responder=responder, at_ms=at_ms, decided_by=by, reason=reason)


def _forwarded(responder: str, inner: DecisionSource | None) -> ForwardedDecision:
    """`forwarded` around the target's `decidedBy`; one too deep for the wire keeps the hop only."""
    wrapped = ForwardedDecision(responder_session_id=responder, decision=inner)
    depth, source = 0, wrapped
    while source.decision is not None:
        depth += 1
        if not isinstance(source.decision, ForwardedDecision):
            break
        source = source.decision
    if depth + 1 > MAX_DECISION_DEPTH:
        return ForwardedDecision(responder_session_id=responder, decision=None)
    return wrapped
