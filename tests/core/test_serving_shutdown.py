"""Shutdown against a heartbeat in flight: once `run()` returns, nothing of ours is left in `serving/`."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from core.asks import DenyingTerminal
from core.human import DecisionRefused, HumanAuthorizer
from core.liveness import Heartbeat
from core.serving import ServeEvent, ServingCore
from tests.helpers import response_path, wait_for, write_request

S = "019ff969-c34c-70be-9034-fae19c852932"


class HeldHeartbeat(Heartbeat):
    """The real heartbeat, held in its thread until its file has been removed (a shutdown that does
    not wait for the beat removes it at once), or for at most `hold_s` (one that waits cannot)."""

    def __init__(self, root: Path, session_id: str, hold_s: float = 1.0) -> None:
        super().__init__(root, session_id)
        self.hold_s = hold_s
        self.entered, self.finished = threading.Event(), threading.Event()

    def beat(self) -> None:
        if not self.entered.is_set():
            self.entered.set()
            until = time.monotonic() + self.hold_s
            while self.path.exists() and time.monotonic() < until:
                time.sleep(0.005)
        try:
            super().beat()
        finally:
            self.finished.set()


async def test_a_beat_in_flight_at_shutdown_never_writes_the_heartbeat_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    core = ServingCore(root, tmp_path / "state", DenyingTerminal())
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


class HeldBatch:
    """A fault hook that holds the publisher's batch at `staged` until released (a slow disk)."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, stage: str) -> None:
        if stage == "staged":
            self.entered.set()
            self.release.wait(30)


async def test_an_answer_whose_batch_outlasts_the_grace_is_still_reported(tmp_path: Path) -> None:
    """Shutdown gives up on the serving task after its grace, but the publisher finishes the batch: the
    answer it publishes is reported (event and log line) all the same."""
    root = tmp_path / "root"
    held = HeldBatch()
    core = ServingCore(root, tmp_path / "state", DenyingTerminal(), fault=held, shutdown_grace_s=0.0)
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
    held = HeldBatch()
    human = HumanAuthorizer()
    core = ServingCore(root, tmp_path / "state", human, fault=held, shutdown_grace_s=0.0)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        write_request(root, S, "cut")
        await wait_for(lambda: bool(human.pending()), what="pending ask")
        approving = asyncio.ensure_future(human.approve_once(human.pending()[0].key))
        await wait_for(held.entered.is_set, what="the decision's batch held at staged")
        core.stop()
        await wait_for(lambda: not core._serving, what="the serving task given up after the grace")
    finally:
        held.release.set()
    await asyncio.wait_for(task, 30)
    with pytest.raises(DecisionRefused, match="serving ended before what became of this decision was known"):
        await asyncio.wait_for(approving, 30)  # a hang guard
    assert response_path(root, S, "cut").exists()  # the publisher finished the batch all the same
