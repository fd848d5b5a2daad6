"""The one route of every ask, whichever door it came in by: arrived → judged → escalated → shown →
decided → delivered, and the one owner of its record from arrival on (`core.serving.records` only
rules whether a change is allowed; the door, `core.serving.door`, says where the ask lives).

1. arrived (`arrive`): the ask is recorded and observers told;
2. judged (`judgment.judge_ask`): this node's rules; a decision is delivered at once (`answer_soon`);
3. escalated (`judgment.review_by_chain`): the chain's links, alongside;
4. shown (`core.vocabulary.asks.Arbiter`): the arbiter's decision is a value; the person's arrives
   later, and is taken alongside once made;
5. decided: the door reads the ask again (still the one decided?), then delivers it: recorded in the
   history (durable) before it is visible anywhere; what became of it reaches the decision's `reply`.

The path runs at once, without a task of its own, as far as it can without waiting (a burst of
10,000 asks decided by rule pays no task each); a step that waits goes on alongside (`Door.go_on`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from core.clock import Clock
from core.serving.door import Door
from core.serving.judgment import Chain, Judge, judge_ask, review_by_chain
from core.serving.records import AskRecord
from core.vocabulary.asks import (
    Answered,
    Arbiter,
    ArbiterDecision,
    Ask,
    DecidesAtOnce,
    Decision,
    Judgment,
    Leave,
    at_once,
)
from core.vocabulary.events import ServeEvent, label
from core.wire.request import ParsedRequest

log = logging.getLogger("pi_authorizer.serve")

#: What a person's decision call learns when serving ended (shutdown, a failure) before it knew.
UNSERVED = Answered(False, "serving ended before what became of this decision was known")


class Route:
    """The steps every ask goes down, wired once per node's judgment and arbiter."""

    def __init__(
        self,
        arbiter: Arbiter,
        judge: Judge,
        chain: Chain | None,
        clock: Clock,
        emit: Callable[[ServeEvent], None],
    ) -> None:
        self.arbiter, self.judge, self.chain, self.clock, self.emit = arbiter, judge, chain, clock, emit
        #: The arbiter's decision on the spot, when it takes every decision so (`DecidesAtOnce`).
        self.at_once = arbiter.decide_at_once if isinstance(arbiter, DecidesAtOnce) else None

    def arrive(
        self, door: Door, record: AskRecord, parsed: ParsedRequest, raw: bytes | None, responder: str,
        timeout_ms: int, now: float | None = None, judged: Judgment | None = None,
    ) -> None:
        """A checked request is an ask now: judged, escalated, shown, as far as it goes without waiting.
        `now`: when it arrived (the moment its intake is served), else read from the clock; `judged`:
        its judgment when its intake's trip judged it already (one no one decides at once)."""
        if now is None:
            now = self.clock.wall()
        door.records.arrive(record, parsed, now)
        self.emit(ServeEvent("arrived", record.key, now, parsed=parsed, raw=raw))
        if judged is None:
            judgment, decision = judge_ask(self.judge, parsed, responder, self.clock)
        else:
            judgment, decision = judged, None
        if decision is not None:
            door.answer_soon(record, decision)
            return
        door.records.move(record, "judged")
        ask = Ask(record.key, parsed, judgment, now, timeout_ms, responder)
        if self.chain is not None:
            door.go_on(record, self._escalate(door, record, ask), False)
            return
        self._show(door, record, ask)

    async def _escalate(self, door: Door, record: AskRecord, ask: Ask) -> None:
        assert self.chain is not None
        named = label(ask.key, ask.parsed)
        reviewed = await review_by_chain(self.chain, ask.parsed, ask.responder_session_id, self.clock, named)
        if record.state != "judged":
            return  # withdrawn, set aside or decided elsewhere while the chain reviewed it
        if reviewed is not None:
            door.answer_soon(record, reviewed[1])
        else:
            self._show(door, record, ask)

    def _show(self, door: Door, record: AskRecord, ask: Ask) -> None:
        """The arbiter decides: a decision taken on the spot that no one waits on is delivered at
        once; any other is taken alongside once it is made (nothing waits meanwhile)."""
        door.records.move(record, "shown")
        if self.at_once is not None:
            now = self.at_once(ask)
            if isinstance(now, Decision) and now.reply is None and not now.by_person:
                door.answer_soon(record, now)
            else:
                self._when_decided(door, record, ask, at_once(now))
            return
        pending = self.arbiter.decide(ask)
        taken = pending.result() if pending.done() and not pending.cancelled() else None
        if isinstance(taken, Decision) and taken.reply is None and not taken.by_person:
            door.answer_soon(record, taken)
        else:
            self._when_decided(door, record, ask, pending)

    def _when_decided(
        self, door: Door, record: AskRecord, ask: Ask, pending: asyncio.Future[ArbiterDecision]
    ) -> None:
        """A withdrawn ask's decision is cancelled: nothing is taken then."""

        def taken(done: asyncio.Future[ArbiterDecision]) -> None:
            if done.cancelled():
                return
            task = door.go_on(record, self._decided(door, record, ask, done), True)
            decision = done.result()
            reply = decision.reply if isinstance(decision, Decision) else None
            if reply is not None:  # whatever ends the task (a failure, shutdown), the person learns it
                task.add_done_callback(lambda _: settle(reply, UNSERVED))

        pending.add_done_callback(taken)

    async def _decided(
        self, door: Door, record: AskRecord, ask: Ask, done: asyncio.Future[ArbiterDecision]
    ) -> None:
        decision = done.result()
        if isinstance(decision, Leave):
            if door.records.advance(record, "left"):
                self.emit(ServeEvent("left", ask.key, self.clock.wall(), parsed=ask.parsed))
                log.info("%s left for another authorizer", label(ask.key, ask.parsed))
                door.acknowledge(record, "left", "this node's arbiter left it")
            return
        unasked = await door.read(record, ask, decision)
        if unasked is not None:
            if not unasked.gone:  # it cannot be read now: the ask waits in its place
                self._when_decided(door, record, ask, self.arbiter.decide(ask))
            if decision.reply is not None:
                settle(decision.reply, unasked)
            return
        answered = await door.deliver(record, decision)
        if record.state == "shown":  # the person's decision could not be delivered: asked again
            self._when_decided(door, record, ask, self.arbiter.decide(ask))
        if decision.reply is not None:
            settle(decision.reply, answered)

    def withdrawn(self, record: AskRecord, parsed: ParsedRequest | None, reason: str | None = None) -> None:
        """The ask left without this node's verdict (its record already says so): its arbiter lets go
        of it and observers are told why (`None`: its child withdrew it)."""
        self.arbiter.withdraw(record.key, reason)
        self.emit(ServeEvent("withdrawn", record.key, self.clock.wall(), parsed=parsed, reason=reason))


def settle(reply: asyncio.Future[Answered], answered: Answered) -> None:
    """Tell the one who decided what became of the decision (once: the first word stands)."""
    if not reply.done():
        reply.set_result(answered)
