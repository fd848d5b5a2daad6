"""A property-based campaign of a person deciding while children write and withdraw (issue 13).

Random interleavings of a child writing a request, withdrawing it (deleting its file), the person
approving or denying it and rescans run against a real serving core and a `HumanAuthorizer`. After
each run: no ask is answered twice, none is answered after its withdrawal, every response written
was reported, every decision the person was told was taken is the response on disk, and every
request still in the inbox waits for the person (nothing lost).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.person import AskDecided, DecisionRefused, HumanAuthorizer
from core.serving import ServeEvent, ServingCore
from core.serving.asks import AskKey
from tests.helpers import response_path, session_dir, wait_for, write_request

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
    human = HumanAuthorizer()
    core = ServingCore(root, base / "state", human)
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
                await wait_for(pending(human, latest[slot]), what="the ask in front of the person")
            elif op == "withdraw" and request_id is not None:
                (requests / f"{request_id}.json").unlink(missing_ok=True)
            elif op in ("approve", "deny") and request_id is not None:
                key = AskKey(S, f"{request_id}.json")
                call = human.approve_once(key) if op == "approve" else human.deny(key, "no")
                decisions.append(asyncio.ensure_future(call))
            elif op == "rescan":
                await core.rescan_all()
            await asyncio.sleep(0)
        outcomes = await asyncio.wait_for(asyncio.gather(*decisions, return_exceptions=True), 30)
        await core.rescan_all()
        await wait_for(lambda: all(waits_or_answered(root, human, p.stem) for p in requests.glob("*.json")),
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


def pending(human: HumanAuthorizer, request_id: str) -> Callable[[], bool]:
    return lambda: human.get(AskKey(S, f"{request_id}.json")) is not None


def waits_or_answered(root: Path, human: HumanAuthorizer, request_id: str) -> bool:
    return pending(human, request_id)() or response_path(root, S, request_id).exists()
