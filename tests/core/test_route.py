"""The one route every ask goes down, whichever door it came in by (`core/serving/route.py`).

A door that notes what the route asks of it stands in for the inbox and the broker (both are tested
end to end under tests/core and tests/courier): the route's order is what is checked here. A rule's
decision is delivered at once without the arbiter; a decision someone waits on is read again before
it is delivered, and never delivered when the door finds the ask changed; one that cannot be read now
is shown again; a left ask is acknowledged; whatever ends a delivery, the one who decided is told.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine

from core.clock import SYSTEM_CLOCK
from core.serving.judgment import NoRecordedAuthority
from core.serving.records import AskRecord, AskRecords
from core.serving.route import UNSERVED, Route
from core.testing import AllowAll
from core.vocabulary.asks import (
    Answered,
    ArbiterDecision,
    Ask,
    AskKey,
    Decision,
    Judgment,
    LeavingArbiter,
)
from core.vocabulary.events import ServeEvent
from core.wire.decisions import UserDecision
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest
from core.wire.response import approve
from tests.helpers import request_body

S = "019ff969-c34c-70be-9034-fae19c852932"
PARSED = parse_request(json.dumps(request_body("r1", S)).encode())


class NotingDoor:
    """A door that notes each call of the route, reads the ask as scripted and delivers by moving the
    record on (as both doors do)."""

    def __init__(self, read: Answered | None = None, fails: bool = False) -> None:
        self.records = AskRecords(S)
        self.calls: list[str] = []
        self.soon: list[Decision] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.answer_read, self.fails = read, fails

    def go_on(
        self, record: AskRecord, step: Coroutine[object, object, None], finish: bool
    ) -> asyncio.Task[None]:
        task = asyncio.ensure_future(step)
        self.tasks.append(task)
        return task

    def answer_soon(self, record: AskRecord, decision: Decision) -> None:
        self.calls.append("answer_soon")
        self.soon.append(decision)

    async def read(self, record: AskRecord, ask: Ask, decision: Decision) -> Answered | None:
        self.calls.append("read")
        return self.answer_read

    async def deliver(self, record: AskRecord, decision: Decision) -> Answered:
        self.calls.append("deliver")
        if self.fails:
            raise RuntimeError("the door broke")
        self.records.move(record, "decided")
        self.records.move(record, "published")
        return Answered(True)

    def acknowledge(self, record: AskRecord, outcome: str, words: str = "") -> None:
        self.calls.append(f"acknowledge {outcome}")

    async def settle(self) -> None:
        """Let every step the route started finish (the route may start more meanwhile: a decision is
        taken by a done-callback of its future, on the loop's next turn)."""
        await asyncio.sleep(0)
        while self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self.tasks = [task for task in self.tasks if not task.done()]
            await asyncio.sleep(0)


class Person:
    """An arbiter whose decisions a test makes later, each with its `reply` (as the person's)."""

    name = "person"

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[ArbiterDecision]] = []
        self.withdrawn: list[AskKey] = []

    def decide(self, ask: Ask) -> asyncio.Future[ArbiterDecision]:
        future: asyncio.Future[ArbiterDecision] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return future

    def withdraw(self, key: AskKey, reason: str | None = None) -> None:
        self.withdrawn.append(key)

    def approves(self) -> asyncio.Future[Answered]:
        reply: asyncio.Future[Answered] = asyncio.get_running_loop().create_future()
        response = approve(responder=S, at_ms=1, decided_by=UserDecision(via="dialog"))
        self.pending[-1].set_result(Decision(response, "user", reply=reply))
        return reply


def arrived(route: Route, door: NotingDoor, parsed: ParsedRequest = PARSED) -> AskRecord:
    record = door.records.take("r1.json")
    route.arrive(door, record, parsed, parsed.raw, S, 60_000)
    return record


async def test_a_rule_decision_is_delivered_at_once_and_never_shown() -> None:
    events: list[ServeEvent] = []
    person = Person()
    route = Route(person, AllowAll(), None, SYSTEM_CLOCK, events.append)
    door = NotingDoor()
    arrived(route, door)
    assert door.calls == ["answer_soon"] and door.soon[0].outcome == "rule"
    assert person.pending == [] and door.tasks == []  # no task: a burst decided by rule pays none
    assert [event.kind for event in events] == ["arrived"]


async def test_a_persons_decision_is_read_again_before_it_is_delivered_and_the_person_told() -> None:
    person = Person()
    route = Route(person, NoRecordedAuthority(), None, SYSTEM_CLOCK, lambda _: None)
    door = NotingDoor()
    record = arrived(route, door)
    assert record.state == "shown" and door.calls == []
    reply = person.approves()
    await door.settle()
    assert door.calls == ["read", "deliver"]
    assert await reply == Answered(True)


async def test_a_decision_on_an_ask_the_door_finds_changed_is_never_delivered() -> None:
    person = Person()
    route = Route(person, NoRecordedAuthority(), None, SYSTEM_CLOCK, lambda _: None)
    changed = Answered(False, "the request was withdrawn or replaced")
    door = NotingDoor(read=changed)
    arrived(route, door)
    reply = person.approves()
    await door.settle()
    assert door.calls == ["read"]
    assert await reply == changed
    assert len(person.pending) == 1  # gone: not shown again


async def test_an_ask_that_cannot_be_read_now_is_shown_again_in_its_place() -> None:
    person = Person()
    route = Route(person, NoRecordedAuthority(), None, SYSTEM_CLOCK, lambda _: None)
    away = Answered(False, "its folder cannot be read now", gone=False)
    door = NotingDoor(read=away)
    arrived(route, door)
    reply = person.approves()
    await door.settle()
    assert await reply == away
    assert len(person.pending) == 2 and not person.pending[1].done()  # before the person again


async def test_a_left_ask_is_acknowledged_and_never_delivered() -> None:
    events: list[ServeEvent] = []
    route = Route(LeavingArbiter(), NoRecordedAuthority(), None, SYSTEM_CLOCK, events.append)
    door = NotingDoor()
    record = arrived(route, door)
    await door.settle()
    assert record.state == "left"
    assert door.calls == ["acknowledge left"]
    assert [event.kind for event in events] == ["arrived", "left"]


async def test_a_delivery_that_fails_tells_the_person_serving_ended() -> None:
    person = Person()
    route = Route(person, NoRecordedAuthority(), None, SYSTEM_CLOCK, lambda _: None)
    door = NotingDoor(fails=True)
    arrived(route, door)
    reply = person.approves()
    await door.settle()
    assert await reply == UNSERVED


class Chain:
    """A chain link that allows once the test lets it."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def review(self, parsed: ParsedRequest) -> Judgment | None:
        await self.go.wait()
        return AllowAll().judge(parsed, S)


async def test_a_chain_decision_on_an_ask_withdrawn_meanwhile_is_dropped() -> None:
    person = Person()
    chain = Chain()
    route = Route(person, NoRecordedAuthority(), chain, SYSTEM_CLOCK, lambda _: None)
    door = NotingDoor()
    record = arrived(route, door)
    assert record.state == "judged" and len(door.tasks) == 1
    door.records.vanish(record.key.name)  # its child withdrew it while the chain reviewed it
    chain.go.set()
    await door.settle()
    assert door.calls == [] and person.pending == []


async def test_a_chain_decision_is_delivered_without_the_arbiter() -> None:
    person = Person()
    chain = Chain()
    route = Route(person, NoRecordedAuthority(), chain, SYSTEM_CLOCK, lambda _: None)
    door = NotingDoor()
    arrived(route, door)
    chain.go.set()
    await door.settle()
    assert door.calls == ["answer_soon"] and door.soon[0].outcome == "chain"
    assert person.pending == []
