"""The core's events as Textual Messages, and what each one means for this run's history and notices.

Every event of the person (`PersonChanged`: added, withdrawn, decided) and of the serving core
(`ServingChanged`) reaches the app only as a Message, posted from the core's callback by `CoreEvents`
(`post_message` is thread safe) and handled in the app's message loop in the order posted: the queue,
the history and the status line follow the order of the events. A note the queue sets about its own
call to the person's API ("Not decided", a batch's summary) is queued behind the events that call
caused (`QueueScreen.say_after_events`).

Thousands of asks arriving at once are not thousands of Messages: person events that follow one another
join the `PersonChanged` posted for the first of them while the app has not taken it yet, and the
core's events likewise join one `ServingChanged` (a burst its rules decide at once is one Message, not
ten thousand); the order between the person's and the core's events is kept (an event of the other
kind closes the run). The core's `arrived`, which the app shows through the person's `AskAdded` or the
answer that follows, is not posted at all.

The rest are pure functions of one event: its line in this run's history (`person_entry`,
`serving_entry`) and the notice it raises (`withdrawn_notice`, `serving_notice`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import overload

from textual.message import Message
from textual.notifications import SeverityLevel

from core.history.rows import describe_decider
from core.person import AskDecided, AskWithdrawn, Person, PersonEvent
from core.serving import ServingCore
from core.vocabulary.events import ServeEvent
from tui.render.ask_facts import ask_label
from tui.sanitize import safe_plain
from tui.screens.run_history import HistoryEntry

#: Outcomes of decisions the person keyed: the app's history already has them from `AskDecided`.
PERSON_OUTCOMES = frozenset({"user", "user_grant", "session_grant", "rule_written"})
WHO = {"approved_by_serving_grant": "grant", "approved_by_written_rule": "rule"}


class PersonChanged(Message):
    """Asks arrived for the person, were withdrawn by their children, or were decided (`Person`): the
    events in order, one or a run of them (`CoreEvents.take` hands them to the app once)."""

    def __init__(self, event: PersonEvent) -> None:
        super().__init__()
        self.events = [event]
        self.taken = False


class ServingChanged(Message):
    """The serving core answered, set a file aside, or stopped or resumed serving a session: the events
    in order, one or a run of them (`CoreEvents.take` hands them to the app once)."""

    def __init__(self, event: ServeEvent) -> None:
        super().__init__()
        self.events = [event]
        self.taken = False


#: The core's events the app does nothing with (an arrival is shown by the person's `AskAdded`).
UNPOSTED = frozenset({"arrived"})


class CoreEvents:
    """Subscribes to the person and the serving core; posts their events as Messages, in order."""

    def __init__(self, person: Person, core: ServingCore, post: Callable[[Message], object]) -> None:
        self.person = person
        self.core = core
        self.post = post
        self._lock = threading.Lock()  # the core may report from another thread than the app's
        #: Posted, not yet taken: the next event of its kind joins it (one of the other kind ends it).
        self._open: PersonChanged | ServingChanged | None = None

    def listen(self) -> None:
        """Receive the core's events as Messages from now on."""
        def person(event: PersonEvent) -> None:
            with self._lock:
                message = self._open
                if isinstance(message, PersonChanged) and not message.taken:
                    message.events.append(event)
                    return
                self._open = PersonChanged(event)
                self.post(self._open)

        def serving(event: ServeEvent) -> None:
            if event.kind in UNPOSTED:
                return
            with self._lock:
                message = self._open
                if isinstance(message, ServingChanged) and not message.taken:
                    message.events.append(event)
                    return
                self._open = ServingChanged(event)
                self.post(self._open)

        def serving_run(events: Sequence[ServeEvent]) -> None:
            """A run of the core's events (an intake's answers) joins the open message at once."""
            shown = [event for event in events if event.kind not in UNPOSTED]
            if not shown:
                return
            with self._lock:
                message = self._open
                if isinstance(message, ServingChanged) and not message.taken:
                    message.events.extend(shown)
                    return
                self._open = ServingChanged(shown[0])
                self._open.events.extend(shown[1:])
                self.post(self._open)

        self.person.subscribe(person)
        self.core.subscribe(serving, serving_run)

    @overload
    def take(self, message: PersonChanged) -> list[PersonEvent]: ...

    @overload
    def take(self, message: ServingChanged) -> list[ServeEvent]: ...

    def take(self, message: PersonChanged | ServingChanged) -> list[PersonEvent] | list[ServeEvent]:
        """The message's events, once: an event from now on goes into a new message."""
        with self._lock:
            message.taken = True
            if self._open is message:
                self._open = None
            return message.events


@dataclass(frozen=True)
class Notice:
    """A notice for the person (`App.notify`'s arguments; always literal)."""

    message: str
    title: str = ""
    severity: SeverityLevel = "information"
    timeout: float | None = None


def person_entry(event: PersonEvent, now: float) -> HistoryEntry | None:
    """This run's history line for a decision or a withdrawal (an arrival has none)."""
    if isinstance(event, AskDecided):
        reason = event.response.denial_reason
        detail = f"reason: {safe_plain(reason, 120)}" if reason else ""
        if event.response.session_grant_width == "family":
            detail = "both directions (read and write)"
        who = WHO.get(event.kind, "you")
        if event.batch:
            who = f"{who} (batch of {event.batch})"
        return HistoryEntry(now, event.kind, who, ask_label(event.ask), detail)
    if isinstance(event, AskWithdrawn) and event.reason is not None:
        return HistoryEntry(now, "withdrawn", "another server", ask_label(event.ask),
                            safe_plain(event.reason, 160))
    if isinstance(event, AskWithdrawn):
        return HistoryEntry(now, "withdrawn", "child", ask_label(event.ask),
                            "the child stopped waiting; never answered")
    return None


def withdrawn_notice(event: AskWithdrawn) -> Notice:
    if event.reason is not None:
        return Notice(f"{ask_label(event.ask)}\nNot answered by this node: {safe_plain(event.reason, 200)}.",
                      title="Ask answered elsewhere", severity="warning", timeout=8)
    return Notice(f"{ask_label(event.ask)}\nThe child stopped waiting; it can no longer be answered "
                  "(not a denial).", title="Ask withdrawn", severity="warning", timeout=8)


def another_server(event: ServeEvent) -> bool:
    """A `not_serving` because another server answers the session (`core.serving.sessions`)."""
    return (event.reason or "").startswith("another server answers session")


def serving_entry(event: ServeEvent, now: float) -> HistoryEntry | None:
    """This run's history line for what the core did on its own (the person's decisions have theirs)."""
    if event.kind == "answered" and event.outcome not in PERSON_OUTCOMES and event.response is not None:
        label = "?"
        if event.parsed is not None:
            req = event.parsed.request
            intent = event.parsed.access_intent
            surface = intent.surface if intent else (req.surface or "?")
            value = intent.match_values[0] if intent and intent.match_values else (req.value or "")
            label = (f"{safe_plain(req.requester_agent_name, 24)} {safe_plain(surface, 20)} "
                     f"{safe_plain(value, 60)}")
        source = event.response.decided_by
        if event.outcome == "courier":  # decided at the node it was carried to: say where and by whom
            return HistoryEntry(now, event.response.state, "courier", label,
                                safe_plain(describe_decider(source, "courier"), 200))
        granted = source is not None and source.kind == "session_approval"
        who = "grant" if granted else event.outcome or "?"
        return HistoryEntry(now, event.response.state, who, label)
    if event.kind == "quarantined":
        return HistoryEntry(now, "quarantined", "core", safe_plain(event.key.name, 60),
                            safe_plain(event.reason, 160))
    if event.kind == "forged":
        return HistoryEntry(now, "forged", "someone else", safe_plain(event.key.name, 60),
                            safe_plain(event.reason, 160))
    if event.kind == "contested":
        return HistoryEntry(now, "contested", "another server", safe_plain(event.key.name, 60),
                            safe_plain(event.reason, 160))
    if event.kind == "not_serving" and another_server(event):
        return HistoryEntry(now, "not serving", "another server", safe_plain(event.key.session_id, 60),
                            safe_plain(event.reason, 200))
    if event.kind == "unsafe_folder":
        return HistoryEntry(now, "unsafe folder", "core", safe_plain(event.key.session_id, 60),
                            safe_plain(event.reason, 200))
    return None


def serving_notice(event: ServeEvent) -> Notice | None:
    """The notice a problem (or the end of one) raises."""
    if event.kind == "quarantined":
        return Notice(f"Unusable request file set aside: {safe_plain(event.reason, 200)}",
                      title="Request quarantined", severity="warning")
    if event.kind == "forged":
        return Notice(safe_plain(event.reason, 300), title="Forged response", severity="error", timeout=30)
    if event.kind == "contested":
        return Notice(f"{safe_plain(event.key.name, 60)}: {safe_plain(event.reason, 200)}",
                      title="Answered by another server", severity="error", timeout=30)
    if event.kind == "not_serving":
        return Notice(f"Session {safe_plain(event.key.session_id, 60)} cannot be served: "
                      f"{safe_plain(event.reason, 200)}", title="Not serving", severity="error", timeout=60)
    if event.kind == "serving_again":
        return Notice(f"Serving session {safe_plain(event.key.session_id, 60)} again.")
    if event.kind == "unsafe_folder":
        return Notice(f"{safe_plain(event.reason, 300)}\nNothing is read or written through it.",
                      title="Session folder refused", severity="error", timeout=15)
    return None
