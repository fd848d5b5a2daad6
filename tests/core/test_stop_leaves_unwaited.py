"""A stop leaves what its grace did not reach: the answers no one waits on (a rule's, a link's, the
fail-safe's) whose batch had not begun when the grace ran out are neither recorded nor written, and
their requests stay for the next start; a person's decision queued beside them is still written. On a
full history each batch is retried for seconds before its fail-safe denials, so a SIGTERM during a
burst took over 30 s and denied thousands of asks a next start could answer (eighth pass)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.person import Person
from core.seams import Seams
from core.serving import ServingCore
from core.serving.intake import SETTLE_FILES
from core.serving.loop import SHUTDOWN_GRACE_S
from core.testing import HeldAt, ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import needs_inotify, response_path, session_dir, wait_for, write_request

S = "019ff969-c34c-70be-9034-fae19c852932"


@needs_inotify  # the three come after the start: seen by their events (the portable watcher polls)
async def test_answers_no_one_waits_on_are_left_after_the_grace(tmp_path: Path) -> None:
    root = tmp_path / "root"
    held, clock = HeldAt("staged"), ManualClock()
    core = ServingCore(root, tmp_path / "state", DenyingArbiter(), seams=Seams(clock=clock, fault=held))
    core.add_session(S)
    task = asyncio.create_task(core.run())
    publisher = core.pipeline.publisher
    try:
        write_request(root, S, "first")
        await wait_for(held.entered.is_set, what="the first answer's batch held at staged")
        for name in ("a", "b", "c"):
            write_request(root, S, name)
        settling = core.served.by_id[S].settling
        await wait_for(lambda: {"a.json", "b.json", "c.json"} <= settling, what="their batch behind it")
        core.stop()
        await wait_for(lambda: publisher._leave_after is not None, what="the stop closing the publisher")
        clock.advance(SHUTDOWN_GRACE_S)  # the grace runs out while the first batch is held
    finally:
        held.release.set()
    await asyncio.wait_for(task, 30)  # a hang guard
    assert response_path(root, S, "first").exists()  # its batch had begun: finished
    for name in ("a", "b", "c"):
        assert not response_path(root, S, name).exists()
        assert (session_dir(root, S) / "requests" / f"{name}.json").exists()  # for the next start


async def test_a_persons_decision_queued_when_the_grace_runs_out_is_still_written(tmp_path: Path) -> None:
    root = tmp_path / "root"
    held, clock = HeldAt("staged"), ManualClock()
    person = Person(clock=clock)
    core = ServingCore(root, tmp_path / "state", person, seams=Seams(clock=clock, fault=held))
    core.add_session(S)
    task = asyncio.create_task(core.run())
    publisher = core.pipeline.publisher
    try:
        for name in ("first", "second"):
            write_request(root, S, name)
        await wait_for(lambda: len(person.pending()) == 2, what="both asks pending")
        first, second = sorted(person.pending(), key=lambda ask: ask.key.name)
        deciding = [asyncio.ensure_future(person.approve_once(first.key))]
        await wait_for(held.entered.is_set, what="the first decision's batch held at staged")
        deciding.append(asyncio.ensure_future(person.approve_once(second.key)))
        await wait_for(lambda: len(publisher._queue) == 1, what="the second decision queued behind it")
        core.stop()
        # The other tasks are cancelled and done: the one wait left on the clock is the grace's.
        await wait_for(lambda: not core._tasks and clock.waiting == 1, what="the stop waiting out its grace")
        clock.advance(SHUTDOWN_GRACE_S)
        await wait_for(lambda: publisher._leave_after is not None, what="the stop closing the publisher")
    finally:
        held.release.set()
    await asyncio.wait_for(task, 30)  # a hang guard
    await asyncio.wait_for(asyncio.gather(*deciding, return_exceptions=True), 30)
    assert response_path(root, S, "first").exists() and response_path(root, S, "second").exists()


async def test_a_stop_during_the_first_pass_over_a_backlog_is_not_held_until_it_ends(tmp_path: Path) -> None:
    """A start finds a backlog (two intakes' worth); its first answers are held on the disk thread,
    so the first pass waits there for its next intake. A stop then goes on to the shutdown at once
    (the first pass was awaited before the stop was looked at: on a full history a SIGTERM waited
    25 s for a start's pass over 8,000 files); past the grace, what is left stays for the next start."""
    root = tmp_path / "root"
    held, clock = HeldAt("staged"), ManualClock()
    names = [f"b{i:04d}" for i in range(SETTLE_FILES + 10)]
    for name in names:
        write_request(root, S, name)
    core = ServingCore(root, tmp_path / "state", DenyingArbiter(), seams=Seams(clock=clock, fault=held))
    core.add_session(S)
    task = asyncio.create_task(core.run())
    publisher = core.pipeline.publisher
    try:
        await wait_for(held.entered.is_set, what="the first intake's answers held at staged")
        core.stop()
        await wait_for(lambda: publisher._leave_after is not None, what="the stop closing the publisher")
        clock.advance(SHUTDOWN_GRACE_S)
    finally:
        held.release.set()
    await asyncio.wait_for(task, 30)  # a hang guard
    answered = [name for name in names if response_path(root, S, name).exists()]
    left = [name for name in names if (session_dir(root, S) / "requests" / f"{name}.json").exists()]
    assert 0 < len(answered) <= SETTLE_FILES and sorted(answered + left) == names
