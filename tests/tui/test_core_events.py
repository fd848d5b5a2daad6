"""What the core reports reaches the person in order: the core's events arrive as Messages handled in
the order posted (a note about the queue's own call follows the events it caused), forged responses,
sessions it cannot serve, session folders that are links."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import cast

import pytest
from textual.message import Message
from textual.widgets import Static

from core.person import AskAdded, AskDecided, AskWithdrawn, Person
from core.serving import ServingCore
from core.vocabulary.asks import Ask, AskKey, Judgment
from core.vocabulary.events import Observer, RunObserver, ServeEvent
from core.wire.decisions import ForwardedDecision, UserDecision
from core.wire.reader import parse_request
from core.wire.response import approve
from tests.tui.support import (
    ORPHAN,
    SERVED,
    make_rig,
    request_body,
    requests_dir,
    responses_dir,
    settle,
    wait_for,
    wait_response,
    wait_rows,
    write_request,
)
from tui.core_events import CoreEvents, PersonChanged, ServingChanged, serving_entry
from tui.screens.sessions import SessionsScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(30)  # a hang guard, not a speed check



async def test_a_decision_is_not_overwritten_by_an_event_posted_before_it(tmp_path: Path) -> None:
    """At 80x24 a notice goes to the status line. A file is quarantined while the person's approval is
    being written: the quarantine came first, so the line ends on the approval, not on the notice."""
    quarantined = threading.Event()
    held: list[str] = []

    def hold_the_first_write(stage: str) -> None:
        """On the publisher's thread, while the approval is being written (the app busy with the key):
        an unusable request arrives, and the write goes on once the core has reported it."""
        if stage != "arrived" or held:
            return
        held.append(stage)
        folder = requests_dir(rig.root)
        (folder / ".garbage.tmp").write_bytes(b"{ not json")
        (folder / ".garbage.tmp").rename(folder / "garbage.json")
        assert quarantined.wait(30)  # a hang guard

    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False), fault=hold_the_first_write)
    write_request(rig.root, request_body("first"))
    seen: list[Message] = []
    async with rig.app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        def observed(event: ServeEvent) -> None:  # subscribed after the app: its Message is posted first
            if event.kind == "quarantined":
                quarantined.set()

        rig.core.subscribe(observed)
        await wait_rows(pilot, rig.app, 1)
        await pilot.press("y")
        await wait_response(pilot, rig.root, "first")
        await wait_for(pilot, lambda: {"quarantined", "approved"} <= {e.what for e in rig.app.history})
        await settle(pilot)
        assert held and quarantined.is_set()
        kinds = [e.what for e in rig.app.history]
        assert kinds.index("quarantined") < kinds.index("approved")  # the history is in event order
        assert rig.app.queue.status_text.startswith("Approved once: "), rig.app.queue.status_text
        # Both reached the app as Messages, the decision too, in the order the events happened.
        order = [("decided" if isinstance(m, PersonChanged) else "quarantined") for m in seen
                 if (isinstance(m, PersonChanged) and any(isinstance(e, AskDecided) for e in m.events))
                 or (isinstance(m, ServingChanged) and any(e.kind == "quarantined" for e in m.events))]
        assert order == ["quarantined", "decided"]


# -- the core's events reach the app as Messages ----------------------------------------------------


async def test_asks_and_serving_events_reach_the_app_as_messages(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, UiSettings(input_grace_ms=0, double_press=False))
    seen: list[Message] = []
    write_request(rig.root, request_body("msg-1"))
    async with rig.app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_rows(pilot, rig.app, 1)
        added = [e for m in seen if isinstance(m, PersonChanged) for e in m.events]
        assert [type(e) for e in added] == [AskAdded] and added[0].ask.request.id == "msg-1"
        await pilot.press("y")
        await wait_response(pilot, rig.root, "msg-1")
        await wait_for(pilot, lambda: any(isinstance(m, ServingChanged) and m.events[0].kind == "answered"
                                          for m in seen))


async def test_a_forged_response_is_shown_as_an_error(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-f"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        (responses_dir(rig.root) / "req-f.json").write_text('{"approved":true,"state":"approved"}')
        await rig.core.rescan_all()
        await wait_for(pilot, lambda: any(n.title == "Forged response" for n in rig.toasts))
        await wait_rows(pilot, rig.app, 0)
        assert any(e.what == "forged" for e in rig.app.history)


async def test_an_unlistable_inbox_is_shown_until_it_heals(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    write_request(rig.root, request_body("req-x"))
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_rows(pilot, rig.app, 1)
        folder = requests_dir(rig.root)
        shutil.rmtree(folder)
        folder.symlink_to(folder.name)  # a link loop: listing fails
        await rig.core.rescan_all()
        await wait_for(pilot, lambda: any(n.title == "Not serving" for n in rig.toasts))
        assert rig.app.sub_title.startswith("NOT SERVING")
        folder.unlink()
        folder.mkdir()
        await rig.core.rescan_all()
        await settle(pilot)
        assert not rig.app.sub_title.startswith("NOT SERVING")




async def test_another_server_on_the_inbox_is_named_in_the_title_until_it_is_gone(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    """Another server's temp name in `responses/` (a live process not this one): the title and a
    notice say why this node does not answer the session; gone, the title clears."""
    rig = make_rig(tmp_path)
    responses = responses_dir(rig.root)
    responses.mkdir(parents=True)

    def publishing() -> bool:
        """The other server publishes an answer (again, until its watch is up): its temp, then gone."""
        temp = responses / f"x.json.{other.pid}.1800000000000.tmp"
        temp.write_text("{}")
        temp.unlink()
        return rig.app.sub_title.endswith(": another server answers it")

    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, publishing)
        assert rig.app.sub_title == f"NOT SERVING {SERVED}: another server answers it"
        assert any(n.title == "Not serving" and "another server answers session" in n.message
                   for n in rig.toasts)
        assert any(e.what == "not serving" and e.who == "another server" for e in rig.app.history)
        other.kill()
        other.wait()
        await wait_for(pilot, lambda: not rig.app.sub_title.startswith("NOT SERVING"))


async def test_a_linked_responses_folder_is_notified_and_shown_in_the_sessions_view(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    sibling = tmp_path / "sibling-responses"
    sibling.mkdir()
    write_request(rig.root, request_body("req-1"))
    responses_dir(rig.root).rmdir()
    responses_dir(rig.root).symlink_to(sibling)
    write_request(rig.root, request_body("req-o", target=ORPHAN), session_id=ORPHAN)
    orphan_requests = rig.root / "sessions" / ORPHAN / "requests"
    os.rename(orphan_requests, tmp_path / "moved")
    orphan_requests.symlink_to(tmp_path / "moved")
    async with rig.app.run_test(size=(140, 40)) as pilot:
        def refused() -> bool:
            return any(n.title == "Session folder refused" for n in rig.toasts)

        await wait_for(pilot, refused, within=30)
        note = next(n for n in rig.toasts if n.title == "Session folder refused")
        assert "responses is a symbolic link (never followed)" in note.message
        await pilot.press("S")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, SessionsScreen), within=30)
        screen = rig.app.screen
        assert isinstance(screen, SessionsScreen)
        await wait_for(pilot, lambda: {SERVED, ORPHAN} <= {row.session_id for row in screen.rows}, within=30)
        await settle(pilot)
        rows = {row.session_id: row for row in screen.rows}
        assert "responses is a symbolic link" in str(rows[SERVED].problem)
        assert "requests is a symbolic link" in str(rows[ORPHAN].problem)
        screen.table.move_cursor(row=[r.session_id for r in screen.rows].index(ORPHAN))
        await pilot.press("a")
        await settle(pilot)
        assert "Not adopted" in str(screen.query_one("#sessions-note", Static).render())
        assert ORPHAN not in rig.core.served
    assert os.listdir(sibling) == []


def test_an_answer_carried_to_another_node_says_where_and_by_whom_in_this_runs_history() -> None:
    parsed = parse_request(json.dumps(request_body("carried")).encode())
    relayed = approve(responder=SERVED, at_ms=0, decided_by=ForwardedDecision(
        responder_session_id="P\x1b[2J", decision=UserDecision(via="dialog")))
    event = ServeEvent("answered", AskKey(SERVED, "carried.json"), 0.0, parsed, relayed, "courier")
    entry = serving_entry(event, 1.0)
    assert entry is not None and (entry.what, entry.who) == ("approved", "courier")
    assert entry.detail == "carried to session:P␛[2J, decided there by person (dialog)"


class StandInCore:
    """What `CoreEvents` subscribes to: its observers and run observers kept, told by the test."""

    def __init__(self) -> None:
        self.observers: list[Observer] = []
        self.runs: list[RunObserver] = []

    def subscribe(self, observer: Observer, run: RunObserver | None = None) -> None:
        self.observers.append(observer)
        if run is not None:
            self.runs.append(run)

    def tell_run(self, events: list[ServeEvent]) -> None:
        """As the core tells an intake's answers: one call per run observer."""
        for run in self.runs:
            run(events)


def listening_to(core: StandInCore) -> tuple[Person, list[Message], CoreEvents]:
    """A person and `core`, their events posted into a list."""
    person = Person()
    posted: list[Message] = []
    events = CoreEvents(person, cast("ServingCore", core), posted.append)
    events.listen()
    return person, posted, events


def listening() -> tuple[Person, list[Observer], list[Message], CoreEvents]:
    """A person and a stand-in core (its observers kept), their events posted into a list."""
    core = StandInCore()
    person, posted, events = listening_to(core)
    return person, core.observers, posted, events


async def test_a_run_of_person_events_is_one_message_until_the_app_takes_it() -> None:
    """A burst is not thousands of Messages: person events join the one posted for the first of them
    until the app takes it; a core event closes the run (the order stays), `arrived` is not posted."""
    person, observers, posted, events = listening()
    asks = [Ask(key=AskKey(SERVED, f"run-{i}.json"), parsed=parse_request(json.dumps(request_body(f"run-{i}"))
                                                                         .encode()),
                judgment=Judgment("ask"), arrived_at=0.0, timeout_ms=600_000, responder_session_id=SERVED)
            for i in range(3)]
    person.decide(asks[0])
    person.decide(asks[1])
    assert len(posted) == 1 and isinstance(posted[0], PersonChanged)
    assert [e.ask for e in posted[0].events] == asks[:2]
    observers[0](ServeEvent("arrived", asks[2].key, 0.0))
    assert len(posted) == 1  # the app does nothing with an arrival: the person's AskAdded shows it
    observers[0](ServeEvent("quarantined", AskKey(SERVED, "bad.json"), 0.0, reason="not json"))
    person.decide(asks[2])
    assert [type(m) for m in posted] == [PersonChanged, ServingChanged, PersonChanged]
    assert [type(e) for e in events.take(cast("PersonChanged", posted[2]))] == [AskAdded]
    person.withdraw(asks[2].key)  # the message was taken: this event is a new one, after it
    assert len(posted) == 4 and [type(e) for e in cast("PersonChanged", posted[3]).events] == [AskWithdrawn]


async def test_a_run_of_core_events_is_one_message_until_the_app_takes_it() -> None:
    """A burst the rules decide at once is one Message: the core's events join the one posted for the
    first of them until the app takes it; a person event closes the run, and the order stays."""
    person, observers, posted, events = listening()
    answered = [ServeEvent("answered", AskKey(SERVED, f"b-{i}.json"), 0.0) for i in range(3)]
    for event in answered[:2]:
        observers[0](event)
    assert len(posted) == 1 and isinstance(posted[0], ServingChanged)
    ask = Ask(key=AskKey(SERVED, "p.json"), parsed=parse_request(json.dumps(request_body("p")).encode()),
              judgment=Judgment("ask"), arrived_at=0.0, timeout_ms=600_000, responder_session_id=SERVED)
    person.decide(ask)  # a person event between: the run of the core's ends
    observers[0](answered[2])
    assert [type(m) for m in posted] == [ServingChanged, PersonChanged, ServingChanged]
    first = posted[0]
    assert isinstance(first, ServingChanged) and events.take(first) == answered[:2]
    assert cast("ServingChanged", posted[2]).events == [answered[2]]
    quarantined = ServeEvent("quarantined", AskKey(SERVED, "bad.json"), 0.0, reason="not json")
    events.take(cast("ServingChanged", posted[2]))
    observers[0](quarantined)  # the last one was taken: a new message
    assert len(posted) == 4 and cast("ServingChanged", posted[3]).events == [quarantined]


async def test_a_run_of_answers_joins_the_open_message_in_one_call() -> None:
    """An intake's answers reach the app as a run (`ServingCore.subscribe`'s `run`): the run joins the
    open message as single events would, in order; `arrived` is not posted; a taken message is not
    joined, and a run of nothing shown posts nothing."""
    core = StandInCore()
    _, posted, events = listening_to(core)
    observers = core.observers
    answered = [ServeEvent("answered", AskKey(SERVED, f"r-{i}.json"), 0.0) for i in range(5)]
    observers[0](answered[0])
    core.tell_run([*answered[1:3], ServeEvent("arrived", AskKey(SERVED, "x.json"), 0.0)])
    assert len(posted) == 1 and cast("ServingChanged", posted[0]).events == answered[:3]
    events.take(cast("ServingChanged", posted[0]))
    core.tell_run([ServeEvent("arrived", AskKey(SERVED, "y.json"), 0.0)])
    assert len(posted) == 1
    core.tell_run(answered[3:])
    assert len(posted) == 2 and cast("ServingChanged", posted[1]).events == answered[3:]
