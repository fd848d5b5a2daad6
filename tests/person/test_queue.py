"""The person's queue never loses an undecided ask whose request still exists (red-team finding 1), and
never answers one twice.

An ask waiting for the person is always either in front of the person (listed and decidable) or being
answered. Two interleavings used to break that:

- a late reply for an ask whose file was replaced under the same name: the core ends the old ask
  (`CHANGED`) and serves the new file at once; the reply of the old decision then dropped the NEW ask
  from the queue (by name), leaving its record `shown` with nobody able to decide it;
- a person's decision call cancelled (a screen closed) while its answer was being written: the queue
  never learnt the outcome, so an answered ask stayed listed and could not be decided.

The first is driven without a serving core (the test plays the core's part, as in
`tests/core/test_arbiters.py`); the second on a real core whose publisher is held at a named fault
point.

Then a property-based campaign (issue 13): random interleavings of a child writing a request,
withdrawing it (deleting its file), the person approving or denying it and rescans run against a real
serving core and a `Person`. After each run: no ask is answered twice, none is answered after
its withdrawal, every response written was reported, every decision the person was told was taken is
the response on disk, and every request still in the inbox waits for the person (nothing lost).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.person import AskAdded, AskDecided, AskWithdrawn, DecisionRefused, Person, PersonEvent
from core.serving import ServingCore
from core.testing import HeldDisk
from core.vocabulary.asks import Answered, ArbiterDecision, Ask, AskKey, Decision, Judgment
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from tests.helpers import (
    Served,
    read_response_when_written,
    request_body,
    response_path,
    session_dir,
    wait_for,
    write_request,
)


def ask_for(request_id: str, value: str) -> Ask:
    parsed = parse_request(json.dumps(request_body(request_id, S, value=value)).encode())
    return Ask(AskKey(S, f"{request_id}.json"), parsed, Judgment("ask"), 1.0, 600_000, S)


async def taken(pending: asyncio.Future[ArbiterDecision]) -> asyncio.Future[Answered]:
    """The core's part: the person's decision taken; what it is told goes on its reply (the wait is a
    hang guard only)."""
    decision = await asyncio.wait_for(asyncio.shield(pending), 10)
    assert isinstance(decision, Decision) and decision.reply is not None
    return decision.reply


async def test_a_late_reply_for_a_replaced_ask_leaves_the_new_ask_under_that_name_decidable() -> None:
    person = Person()
    old, new = ask_for("r1", "ls"), ask_for("r1", "rm -rf ~")
    first = person.decide(old)
    approving = asyncio.ensure_future(person.approve_once(old.key))
    reply = await taken(first)
    # The core's part: the file was replaced, so the old ask ends; the new file is served and shown
    # before the old decision's call hears back (a rescan that completed in between).
    second = person.decide(new)
    reply.set_result(Answered(False, "the request was withdrawn or replaced", gone=True))
    with pytest.raises(DecisionRefused, match="replaced"):
        await approving
    assert person.pending() == [new]  # it used to be dropped here: the record stayed shown, undecidable
    denying = asyncio.ensure_future(person.deny(new.key, "no"))
    denial = await taken(second)
    denial.set_result(Answered(True))
    assert (await denying).kind == "denied_with_reason" and not person.pending()


async def test_a_decision_another_approver_beat_leaves_the_queue_as_decided_elsewhere() -> None:
    """A broker ask the person decided while another approver's verdict won its key: it leaves the
    queue saying who decided it, never as the child's withdrawal (the app then says "withdrawn by the
    child", which would be false)."""
    person = Person()
    gone: list[PersonEvent] = []
    person.subscribe(gone.append)
    ask = ask_for("r1", "make deploy")
    pending = person.decide(ask)
    approving = asyncio.ensure_future(person.approve_once(ask.key))
    reply = await taken(pending)
    reply.set_result(Answered(False, "decided elsewhere by node-b", elsewhere="decided elsewhere by node-b"))
    with pytest.raises(DecisionRefused, match="decided elsewhere by node-b"):
        await approving
    [withdrawn] = [e for e in gone if isinstance(e, AskWithdrawn)]
    assert withdrawn.ask is ask and withdrawn.reason == "decided elsewhere by node-b"
    assert person.pending() == []


async def test_a_late_success_for_a_replaced_ask_leaves_the_new_ask_in_the_queue() -> None:
    person = Person()
    old, new = ask_for("r1", "ls"), ask_for("r1", "make")
    first = person.decide(old)
    approving = asyncio.ensure_future(person.approve_once(old.key))
    reply = await taken(first)
    person.decide(new)
    reply.set_result(Answered(True))
    assert (await approving).ask is old
    assert person.pending() == [new]


async def test_a_decision_on_the_ask_shown_never_decides_another_under_its_name() -> None:
    """Issue 20 finding 4: every decision method takes the very ask the person saw (`shown=`); another
    ask now under the same name is refused, untouched, on every path."""
    person = Person()
    old, new = ask_for("r1", "ls"), ask_for("r1", "rm -rf ~")
    person.decide(old)
    person.withdraw(old.key)
    pending = person.decide(new)
    calls: list[Callable[[], Awaitable[AskDecided]]] = [
        lambda: person.approve_once(old.key, shown=old),
        lambda: person.approve_for_requester_session(old.key, shown=old),
        lambda: person.approve_for_serving_session(old.key, shown=old, reach=()),
        lambda: person.deny(old.key, "no", shown=old),
    ]
    for call in calls:
        with pytest.raises(DecisionRefused, match="changed since it was shown"):
            await call()
    assert not pending.done() and person.pending() == [new]


async def test_a_decision_call_cancelled_while_its_answer_is_written_leaves_no_ask_behind(
    tmp_path: Path,
) -> None:
    disk = HeldDisk()
    person = Person()
    events: list[PersonEvent] = []
    person.subscribe(events.append)
    async with Served(tmp_path, person, writer=disk, fault=disk.fault) as served:
        write_request(served.root, S, "asked")
        await wait_for(lambda: bool(person.pending()), what="the ask in front of the person")
        approving = asyncio.ensure_future(person.approve_once(person.pending()[0].key))
        try:
            await wait_for(disk.entered.is_set, what="the decision's batch held")
            approving.cancel()  # the screen that made the call went away
            with pytest.raises(asyncio.CancelledError):
                await approving
        finally:
            disk.release.set()
        body = await read_response_when_written(served.root, S, "asked")
        assert body["state"] == "approved"
        await wait_for(lambda: not person.pending(), what="the answered ask out of the queue")
        assert [type(e) for e in events] == [AskAdded, AskDecided]
        assert served.kinds().count("answered") == 1


async def test_a_cancelled_call_whose_answer_failed_leaves_the_ask_decidable(tmp_path: Path) -> None:
    disk = HeldDisk(failures=-1)
    person = Person()
    async with Served(tmp_path, person, writer=disk, fault=disk.fault) as served:
        write_request(served.root, S, "asked")
        await wait_for(lambda: bool(person.pending()), what="the ask in front of the person")
        key = person.pending()[0].key
        approving = asyncio.ensure_future(person.approve_once(key))
        try:
            await wait_for(disk.entered.is_set, what="the decision's batch held")
            approving.cancel()
            with pytest.raises(asyncio.CancelledError):
                await approving
        finally:
            disk.release.set()
        await wait_for(lambda: "answer_failed" in served.kinds(), what="the failed write reported")
        disk.failures = 0
        await wait_for(lambda: person.awaiting(key), what="the ask in front of the person again")
        decided = await person.deny(key, "not now")
        assert decided.kind == "denied_with_reason"
        body = await read_response_when_written(served.root, S, "asked")
        assert body["denialReason"] == "not now" and response_path(served.root, S, "asked").exists()


S = "019ff969-c34c-70be-9034-fae19c852932"
Step = tuple[str, int]
#: Three asks in front of the person first, then anything (a write is a new ask in that slot).
steps_strategy = st.lists(
    st.tuples(st.sampled_from(["write", "withdraw", "approve", "deny", "rescan"]), st.integers(0, 2)),
    min_size=3,
    max_size=14,
).map(lambda steps: [("write", 0), ("write", 1), ("write", 2), *steps])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps_strategy)
def test_a_person_and_children_racing_never_answer_twice_or_lose_an_ask(
    tmp_path_factory: pytest.TempPathFactory, steps: list[Step]
) -> None:
    asyncio.run(campaign(tmp_path_factory.mktemp("person"), steps))


async def campaign(base: Path, steps: list[Step]) -> Counter[str]:
    """Run the steps; what happened, counted (event kinds, the person's outcomes)."""
    root = base / "root"
    person = Person()
    core = ServingCore(root, base / "state", person)
    events: list[ServeEvent] = []
    core.subscribe(events.append)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    requests = session_dir(root, S) / "requests"
    serial = itertools.count()
    latest: dict[int, str] = {}
    decisions: list[asyncio.Future[AskDecided]] = []
    try:
        for op, slot in steps:
            request_id = latest.get(slot)
            if op == "write":
                latest[slot] = f"r{slot}-{next(serial)}"  # a child never reuses an id
                write_request(root, S, latest[slot])
                await wait_for(pending(person, latest[slot]), what="the ask in front of the person")
            elif op == "withdraw" and request_id is not None:
                (requests / f"{request_id}.json").unlink(missing_ok=True)
            elif op in ("approve", "deny") and request_id is not None:
                key = AskKey(S, f"{request_id}.json")
                call = person.approve_once(key) if op == "approve" else person.deny(key, "no")
                decisions.append(asyncio.ensure_future(call))
            elif op == "rescan":
                await core.rescan_all()
            await asyncio.sleep(0)
        outcomes = await asyncio.wait_for(asyncio.gather(*decisions, return_exceptions=True), 30)
        await core.rescan_all()
        await wait_for(lambda: all(waits_or_answered(root, person, p.stem) for p in requests.glob("*.json")),
                       what="every request left waits for the person or is answered")
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)
    for outcome in outcomes:
        if isinstance(outcome, AskDecided):
            body = json.loads(response_path(root, S, outcome.ask.request.id).read_bytes())
            assert body["state"] == outcome.response.state
        else:
            assert isinstance(outcome, DecisionRefused), outcome
    for request_id in {f"r{slot}-{n}" for slot in range(3) for n in range(len(steps))}:
        kinds = [e.kind for e in events if e.key.name == f"{request_id}.json"]
        assert kinds.count("answered") <= 1, (request_id, kinds)
        if "withdrawn" in kinds and "answered" in kinds:
            assert kinds.index("answered") < kinds.index("withdrawn"), (request_id, kinds)
        assert response_path(root, S, request_id).exists() == ("answered" in kinds), (request_id, kinds)
    return Counter([e.kind for e in events] + [type(o).__name__ for o in outcomes])


def pending(person: Person, request_id: str) -> Callable[[], bool]:
    return lambda: person.get(AskKey(S, f"{request_id}.json")) is not None


def waits_or_answered(root: Path, person: Person, request_id: str) -> bool:
    return pending(person, request_id)() or response_path(root, S, request_id).exists()


async def test_a_request_renamed_over_under_its_id_is_the_old_ask_withdrawn_and_a_new_one(
        tmp_path: Path) -> None:
    """Issue 20: a child renames a new file over its pending request (same name, another inode and
    other bytes, never absent from a listing). The next rescan ends the old ask (withdrawn: the person
    no longer sees it, nothing decided on it applies) and serves the new file as a new ask; the
    person's decision on the new ask is of the new bytes."""
    person = Person()
    async with Served(tmp_path, person) as served:
        write_request(served.root, S, "r1", value="ls")
        await wait_for(lambda: len(person.pending()) == 1, what="the first ask pending")
        old = person.pending()[0]
        write_request(served.root, S, "r1", value="rm -rf ~")  # temp + rename over the same name
        await served.core.rescan_all()
        await wait_for(lambda: bool(person.pending()) and person.pending()[0] is not old,
                       what="the new ask shown")
        [new] = person.pending()
        assert new.request.value == "rm -rf ~" and new.key == old.key
        assert [e.kind for e in served.events].count("withdrawn") == 1
        with pytest.raises(DecisionRefused, match="changed since it was shown"):
            await person.approve_once(old.key, shown=old)
        assert not response_path(served.root, S, "r1").exists()
        decided = await person.deny(new.key, "no", shown=new)
        assert decided.ask is new
        body = await read_response_when_written(served.root, S, "r1")
        assert body["state"] == "denied_with_reason"
