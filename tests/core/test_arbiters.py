"""Each arbiter returns its decision as a value; none touches the ask or its files.

The fail-safe and leave decide at once; the person's decision is a future resolved by a decision
method, which then waits on the decision's `reply` for what the serving core made of it. Driven here
without a serving core: the test plays the core's part (it reads the decision, answers the reply).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from core.person import AskAdded, AskDecided, AskWithdrawn, DecisionRefused, Person, PersonEvent
from core.testing import ManualClock
from core.vocabulary.asks import (
    LEAVE,
    UNATTENDED_DENIAL,
    Answered,
    ArbiterDecision,
    Ask,
    AskKey,
    Decision,
    DenyingArbiter,
    Judgment,
    LeavingArbiter,
)
from core.wire.reader import parse_request
from tests.helpers import request_body

S = "019ff969-c34c-70be-9034-fae19c852932"


def make_ask(request_id: str = "r1") -> Ask:
    parsed = parse_request(json.dumps(request_body(request_id, S)).encode())
    return Ask(AskKey(S, f"{request_id}.json"), parsed, Judgment("ask"), 1.0, 600_000, S)


def decision_of(pending: asyncio.Future[ArbiterDecision]) -> Decision:
    decision = pending.result()
    assert isinstance(decision, Decision)
    return decision


async def settled(pending: asyncio.Future[ArbiterDecision]) -> asyncio.Future[ArbiterDecision]:
    """The core's part: wait for the decision (a hang guard only)."""
    await asyncio.wait_for(asyncio.shield(pending), 10)
    return pending


async def test_the_fail_safe_returns_an_explained_denial_at_once() -> None:
    clock = ManualClock(1_800_000_000.0)
    pending = DenyingArbiter(clock).decide(make_ask())
    assert pending.done()
    decision = decision_of(pending)
    assert decision.outcome == "fail-safe" and decision.reply is None
    response = decision.response
    assert response.state == "denied_with_reason" and response.denial_reason == UNATTENDED_DENIAL
    assert response.responded_at == 1_800_000_000_000 and response.responder_session_id == S


def test_the_fail_safe_shares_one_denial_within_a_millisecond_and_no_further() -> None:
    """A burst's asks denied in one millisecond share one decision (a value: immutable); another
    millisecond or another responder gets its own, each with its time and responder."""
    clock = ManualClock(1_800_000_000.0)
    arbiter = DenyingArbiter(clock)
    first, again = arbiter.decide_at_once(make_ask("a")), arbiter.decide_at_once(make_ask("b"))
    assert first is again
    clock.advance(0.001)
    later = arbiter.decide_at_once(make_ask("c"))
    other = make_ask("d")
    elsewhere = arbiter.decide_at_once(Ask(other.key, other.parsed, other.judgment, 1.0, 600_000, "other"))
    assert isinstance(first, Decision) and isinstance(later, Decision) and isinstance(elsewhere, Decision)
    assert later is not first and later.response.responded_at == first.response.responded_at + 1
    assert elsewhere.response.responder_session_id == "other" and first.response.responder_session_id == S
    assert {d.response.denial_reason for d in (first, later, elsewhere)} == {UNATTENDED_DENIAL}


async def test_leave_returns_leave_at_once() -> None:
    pending = LeavingArbiter().decide(make_ask())
    assert pending.done() and pending.result() is LEAVE


async def test_the_person_decides_later_and_learns_what_became_of_it() -> None:
    person = Person()
    events: list[PersonEvent] = []
    person.subscribe(events.append)
    ask = make_ask()
    pending = person.decide(ask)
    assert not pending.done() and person.pending() == [ask]
    assert [type(e) for e in events] == [AskAdded]
    approving = asyncio.ensure_future(person.approve_once(ask.key))
    decision = decision_of(await settled(pending))  # the core's part: the decision arrives as a value
    assert decision.outcome == "user" and decision.response.state == "approved"
    assert not approving.done()  # the person's call waits for the core's answer
    with pytest.raises(DecisionRefused):  # being answered: no second decision
        await person.deny(ask.key)
    assert decision.reply is not None
    decision.reply.set_result(Answered(True))
    decided = await approving
    assert decided.kind == "approved" and not person.pending()
    assert [type(e) for e in events] == [AskAdded, AskDecided]


async def test_a_failed_write_keeps_the_ask_in_its_place_and_it_is_decided_again() -> None:
    person = Person()
    first, second = make_ask("r1"), make_ask("r2")
    pending = person.decide(first)
    person.decide(second)
    approving = asyncio.ensure_future(person.approve_once(first.key))
    decision = decision_of(await settled(pending))
    again = person.decide(first)  # the core asks again before it replies
    assert decision.reply is not None
    decision.reply.set_result(Answered(False, "writing the response failed: disk full", gone=False))
    with pytest.raises(DecisionRefused, match="disk full"):
        await approving
    assert [a.key for a in person.pending()] == [first.key, second.key]  # in its place, not added twice
    denying = asyncio.ensure_future(person.deny(first.key, "no"))
    denial = decision_of(await settled(again))
    assert denial.response.denial_reason == "no"
    assert denial.reply is not None
    denial.reply.set_result(Answered(True))
    assert (await denying).kind == "denied_with_reason"


async def test_a_withdrawn_ask_cancels_its_decision_and_refuses_one() -> None:
    person = Person()
    events: list[PersonEvent] = []
    person.subscribe(events.append)
    ask = make_ask()
    pending = person.decide(ask)
    person.withdraw(ask.key)
    assert pending.cancelled() and not person.pending()
    assert [type(e) for e in events] == [AskAdded, AskWithdrawn]
    with pytest.raises(DecisionRefused, match="no longer pending"):
        await person.approve_once(ask.key)


async def test_an_ask_withdrawn_while_its_decision_is_published_refuses_the_decision() -> None:
    person = Person()
    ask = make_ask()
    pending = person.decide(ask)
    approving = asyncio.ensure_future(person.approve_once(ask.key))
    decision = decision_of(await settled(pending))
    assert decision.reply is not None
    decision.reply.set_result(Answered(False, "the child withdrew this request"))
    with pytest.raises(DecisionRefused, match="withdrew"):
        await approving
    assert not person.pending()
