"""Shutdown against a heartbeat in flight: once `run()` returns, nothing of ours is left in `serving/`."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from types import FrameType

import pytest

from core.forwarding.liveness import Heartbeat
from core.person import DecisionRefused, Person
from core.seams import Seams
from core.serving import ServingCore
from core.serving.loop import SHUTDOWN_GRACE_S
from core.serving.sessions import Sessions
from core.testing import HeldAt, ManualClock
from core.vocabulary.asks import DenyingArbiter
from core.vocabulary.events import ServeEvent
from tests.helpers import poll_until, response_path, wait_for, write_request

S = "019ff969-c34c-70be-9034-fae19c852932"


def releasing() -> bool:
    """Some thread is inside `Sessions.release` (the shutdown is releasing the sessions served)."""
    code = Sessions.release.__code__
    for top in sys._current_frames().values():
        frame: FrameType | None = top
        while frame is not None:
            if frame.f_code is code:
                return True
            frame = frame.f_back
    return False


class HeldHeartbeat(Heartbeat):
    """The real heartbeat, held in its thread until the shutdown releases the sessions (one that waits
    for the beat is then waiting) or its file has been removed (one that does not wait removed it)."""

    def __init__(self, root: Path, session_id: str) -> None:
        super().__init__(root, session_id)
        self.entered, self.finished = threading.Event(), threading.Event()

    def beat(self) -> None:
        if not self.entered.is_set():
            self.entered.set()
            poll_until(lambda: releasing() or not self.path.exists(), what="the shutdown's release")
        try:
            super().beat()
        finally:
            self.finished.set()


async def test_a_beat_in_flight_at_shutdown_never_writes_the_heartbeat_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    core = ServingCore(root, tmp_path / "state", DenyingArbiter())
    served = core.add_session(S)
    held = HeldHeartbeat(root, S)
    served.heartbeat = held
    assert held.path.exists()  # published when the session was taken
    task = asyncio.create_task(core.run())
    await wait_for(held.entered.is_set, what="the heartbeat loop's first beat")
    core.stop()
    await asyncio.wait_for(task, 30)  # a hang guard
    # The beat was let finish before the heartbeat was removed: it cannot write it again later.
    assert held.finished.is_set()
    assert not held.path.exists()



async def grace_given_up(core: ServingCore, clock: ManualClock) -> None:
    """The shutdown grace runs on the clock: the serving task is waited for until the clock passes it."""
    # The other tasks are cancelled and done: the one wait left is the grace's.
    await wait_for(lambda: not core._tasks and clock.waiting == 1, what="the shutdown waiting out its grace")
    assert core._serving  # no real time gives up on it
    clock.advance(SHUTDOWN_GRACE_S - 0.001)
    assert core._serving
    clock.advance(0.001)
    await wait_for(lambda: not core._serving, what="the serving task given up after the grace")


async def test_an_answer_whose_batch_outlasts_the_grace_is_still_reported(tmp_path: Path) -> None:
    """Shutdown gives up on the serving task after its grace, but the publisher finishes the batch: the
    answer it publishes is reported (event and log line) all the same."""
    root = tmp_path / "root"
    held = HeldAt("staged")
    core = ServingCore(root, tmp_path / "state", DenyingArbiter(), seams=Seams(fault=held))
    events: list[ServeEvent] = []
    core.subscribe(events.append)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        write_request(root, S, "late")
        await wait_for(held.entered.is_set, what="the batch held at staged")
        core.stop()
        await wait_for(lambda: not core._serving, what="the serving task given up after the grace")
    finally:
        held.release.set()
    await asyncio.wait_for(task, 30)  # a hang guard
    assert response_path(root, S, "late").exists()
    [answered] = [e for e in events if e.kind == "answered"]
    assert answered.key.name == "late.json" and answered.outcome == "fail-safe"


async def test_a_persons_call_whose_decision_is_cut_off_by_shutdown_returns(tmp_path: Path) -> None:
    """Shutdown gives up on publishing the person's decision after the grace: the call returns (it is
    told what became of its decision, as the publisher reports it), it does not wait forever."""
    root = tmp_path / "root"
    held = HeldAt("staged")
    clock = ManualClock()
    person = Person(clock=clock)
    core = ServingCore(root, tmp_path / "state", person, seams=Seams(clock=clock, fault=held))
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        write_request(root, S, "cut")
        await wait_for(lambda: bool(person.pending()), what="pending ask")
        approving = asyncio.ensure_future(person.approve_once(person.pending()[0].key))
        await wait_for(held.entered.is_set, what="the decision's batch held at staged")
        core.stop()
        await grace_given_up(core, clock)
    finally:
        held.release.set()
    await asyncio.wait_for(task, 30)
    with pytest.raises(DecisionRefused, match="serving ended before what became of this decision was known"):
        await asyncio.wait_for(approving, 30)  # a hang guard
    assert response_path(root, S, "cut").exists()  # the publisher finished the batch all the same
