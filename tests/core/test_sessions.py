"""The sessions a core serves (`core.serving.sessions`), on real folders: taken once, beaten for,
refused folders and unservable inboxes said once each, released for the next authorizer."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from core.disk.tree import Anchor, UnsafeFolder
from core.forwarding.liveness import HEARTBEAT_INTERVAL_S, Heartbeat, heartbeat_path, read_heartbeat
from core.seams import Seams
from core.serving.sessions import Sessions
from core.testing import ManualClock
from core.vocabulary.events import ServeEvent
from tests.helpers import wait_for
from tests.history.support import S


def sessions(tmp_path: Path, events: list[ServeEvent]) -> Sessions:
    root, state = tmp_path / "root", tmp_path / "state"
    trees = Anchor(root, "root"), Anchor(state, "state")
    return Sessions(root, state, *trees, Seams(clock=ManualClock()), events.append)


def test_a_session_is_taken_once_with_its_heartbeat_and_released(tmp_path: Path) -> None:
    events: list[ServeEvent] = []
    roster = sessions(tmp_path, events)
    served, new = roster.add(S)
    assert new and roster.add(S) == (served, False)
    assert roster.by_folder[served.inbox.folder_name] is served
    beat = read_heartbeat(heartbeat_path(tmp_path / "root", S))
    assert beat is not None
    roster.release()
    assert not heartbeat_path(tmp_path / "root", S).exists()
    assert sessions(tmp_path, events).add(S)[1]  # the lock is free for the next one
    assert events == []


def test_unservable_and_refused_folders_are_said_once_each(tmp_path: Path) -> None:
    events: list[ServeEvent] = []
    roster = sessions(tmp_path, events)
    served, _ = roster.add(S)
    for _ in range(2):
        roster.set_unservable(served, "its inbox cannot be listed")
    roster.set_unservable(served, None)
    refused = UnsafeFolder("root/sessions/x/requests", "is a symbolic link (never followed)")
    for _ in range(2):
        roster.report_unsafe(served, "inbox", refused, "not served")
    assert [e.kind for e in events] == ["not_serving", "serving_again", "unsafe_folder"]
    assert events[-1].reason == f"{refused}: not served until it is removed"
    assert served.problems["inbox"] is events[-1]
    roster.clear_unsafe(served, "inbox")
    assert not served.problems
    roster.release()


def test_a_front_end_sees_a_snapshot_of_the_served_and_the_other_inboxes(tmp_path: Path) -> None:
    events: list[ServeEvent] = []
    roster = sessions(tmp_path, events)
    served, _ = roster.add(S)
    other = "019ff96a-2222-7000-8000-bbbbbbbbbbbb"
    requests = tmp_path / "root" / "sessions" / other / "requests"
    requests.mkdir(parents=True)
    (requests / "r1.json").write_text("{}")
    records = served.records
    pending = records.take("a.json")
    records.move(pending, "arrived")
    records.move(pending, "judged")
    records.move(pending, "shown")  # a person's ask
    records.move(records.take("b.json"), "decided")  # answered: not waiting
    records.take("c.json")  # being read
    assert len(roster) == 1 and S in roster and other not in roster
    [mine] = roster.statuses()
    assert (mine.session_id, mine.folder, mine.serving, mine.waiting, mine.problem) == (
        S, served.inbox.folder_name, "alive", 2, None)
    assert [(s.session_id, s.serving, s.waiting) for s in roster.others()] == [(other, "absent", 1)]
    for record in list(records):
        records.release(record)  # a snapshot: what the loop does next never changes what was handed out
    assert mine.waiting == 2
    roster.release()


def test_a_release_from_another_thread_waits_for_a_beat_in_flight(tmp_path: Path) -> None:
    """The forced exit's release, from the watchdog's thread while the loop may be stuck: the beat
    being written finishes first (it cannot write the heartbeat again after), then all is released."""
    events: list[ServeEvent] = []
    roster = sessions(tmp_path, events)
    served, _ = roster.add(S)
    path = heartbeat_path(tmp_path / "root", S)
    entered, go, finished = threading.Event(), threading.Event(), threading.Event()

    def slow_beat() -> None:
        entered.set()
        go.wait(30)  # a hang guard
        served.heartbeat.beat()
        finished.set()

    beating = threading.Thread(target=roster._guarded, args=(slow_beat,))
    beating.start()
    assert entered.wait(30)
    releasing = threading.Thread(target=roster.release, kwargs={"wait_s": 30.0})
    releasing.start()
    go.set()
    releasing.join(30)
    beating.join(30)
    assert finished.is_set() and not path.exists()
    roster._guarded(served.heartbeat.beat)  # a beat after the release writes nothing
    assert not path.exists()
    roster.release()  # the loop's own release at shutdown, after it: nothing left to do, no error
    assert sessions(tmp_path, events).add(S)[1]  # the lock is free for the next one


class CountedHeartbeat(Heartbeat):
    """The real heartbeat, counting its beats."""

    def __init__(self, root: Path, session_id: str) -> None:
        super().__init__(root, session_id)
        self.beats = 0

    def beat(self) -> None:
        super().beat()
        self.beats += 1


async def test_the_heartbeat_loop_beats_again_once_its_interval_passed_on_the_clock(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    clock, events = ManualClock(), list[ServeEvent]()
    trees = Anchor(root, "root"), Anchor(state, "state")
    roster = Sessions(root, state, *trees, Seams(clock=clock), events.append)
    served, _ = roster.add(S)
    served.heartbeat = counted = CountedHeartbeat(root, S)
    stop = asyncio.Event()
    loop = asyncio.create_task(roster.heartbeat_loop(stop))
    try:
        await wait_for(lambda: counted.beats == 1 and clock.waiting == 1, what="the first beat, then a wait")
        clock.advance(HEARTBEAT_INTERVAL_S / 2)
        await wait_for(lambda: clock.waiting == 1, what="still waiting")  # half an interval: no beat
        assert counted.beats == 1
        clock.advance(HEARTBEAT_INTERVAL_S / 2)
        await wait_for(lambda: counted.beats == 2 and clock.waiting == 1, what="the second beat, then a wait")
        stop.set()
        await asyncio.wait_for(loop, 30)  # stopping ends the wait at once (a hang guard)
    finally:
        loop.cancel()
        roster.release()
    assert counted.beats == 2 and not heartbeat_path(root, S).exists()
