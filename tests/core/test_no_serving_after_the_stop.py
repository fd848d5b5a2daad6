"""An ask is not answered after its history is closed (campaign10: a SIGTERM mid-burst on a full
history; after "stopped serving" a batch of 6 asks was recorded on the closed database, "Cannot
operate on a closed database", and published as fail-safe denials their children read, which no row
nor spool line holds: `no-history-row`). `Publisher.close` waits for the settles asked for when it
looks (`asyncio.wait(list(self._settling))`); one asked for after that (by a rescan spawned during the
stop, which `ServingCore._shutdown` did not find to cancel: a person's decision on an ask whose file
was rewritten, `Pipeline._unasked`, or a set-aside retried, `_set_aside_later`) is still queued on the
disk thread when serving ends and the history closes, and runs then: its record refused, it is
published as a fail-safe denial, here for an ask a rule allows."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.person import DecisionRefused, Person
from core.seams import Seams
from core.serving import ServingCore
from core.serving.loop import SHUTDOWN_GRACE_S
from core.testing import HeldAt, ManualClock
from core.vocabulary.asks import AskKey
from core.wiring import close_history
from tests.helpers import response_path, session_dir, wait_for, write_request
from tests.history.support import ALLOW_LS, Node, S, intent


async def test_an_ask_settled_after_the_stop_began_is_not_answered_past_the_history(tmp_path: Path) -> None:
    node = Node(tmp_path, ALLOW_LS)
    clock, held, later = ManualClock(), HeldAt("staged"), threading.Event()
    person = Person(clock=clock)
    core = ServingCore(node.root, node.state, person, judge=node.authority, ledger=node.history,
                       seams=Seams(clock=clock, fault=held))
    core.subscribe(node.history.observe)
    core.add_session(S)
    write_request(node.root, S, "a", accessIntent=intent("bash", "cat a"), value="cat a")
    write_request(node.root, S, "b", accessIntent=intent("bash", "ls b"))  # a rule allows: settled at once
    task = asyncio.create_task(core.run())
    publisher = core.pipeline.publisher
    try:
        await wait_for(held.entered.is_set, what="b's settle held at staged")
        await wait_for(lambda: len(person.pending()) == 1, what="a shown to the person")
        core.stop()
        await wait_for(lambda: publisher._leave_after is not None, what="the stop closing the publisher")
        publisher.submit(later.wait, 30)  # the disk thread's next work, after b's settle: held too
        write_request(node.root, S, "a", accessIntent=intent("bash", "ls a"), value="ls a")  # rewritten
        with pytest.raises(DecisionRefused):  # not that ask any more: withdrawn, the inbox listed again
            await person.approve_once(AskKey(S, "a.json"))
        # The rescan it asked for reads the new `a` (a rule allows it) and settles it after b's.
        await wait_for(lambda: len(publisher._settling) == 2, what="the new a's settle queued")
    finally:
        held.release.set()
    try:
        await asyncio.wait_for(task, 30)  # a hang guard
        close_history(node.history, core, SHUTDOWN_GRACE_S)  # as `serve` does once run returns
    finally:
        later.set()
    await asyncio.to_thread(publisher._disk.shutdown, True)  # whatever the disk thread still had to do
    answer = response_path(node.root, S, "a")
    if answer.exists():  # answered: then recorded (or left for the next start, unanswered)
        again = HistoryStore.in_state_dir(node.state)
        try:
            rows = [row for row in again.query() if row.request_id == "a"]
        finally:
            again.close()
        assert any(row.response == answer.read_bytes() for row in rows), (answer.read_bytes(), rows)
    else:  # left: its request stays for the next start, which answers it
        assert (session_dir(node.root, S) / "requests" / "a.json").exists()
