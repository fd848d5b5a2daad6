"""What the app does with the core's events: the queue follows the person's asks (added, decided,
withdrawn), this run's history gets a line for every answer, and problems become notices.

Every event of the person's slot (`HumanChanged`: added, withdrawn, decided) and of the serving core
(`ServingChanged`) reaches the app only as a Textual Message, posted from the core's callback (thread
safe) and handled in the app's message loop in the order posted: the queue, the history and the
status line follow the order of the events. A note the queue sets about its own call to the person's
API ("Not decided", a batch's summary) is queued behind the events that call caused
(`QueueView.say_after_events`).
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.timer import Timer

from core.person import AskAdded, AskDecided, AskWithdrawn, HumanEvent
from core.serving import ServeEvent, ServingCore
from core.serving.asks import Ask
from tui.attention import ATTENTION_COALESCE_S, Attention
from tui.render.facts import ask_label
from tui.sanitize import safe_plain
from tui.screens.ask_steps import AskModal
from tui.screens.grant_steps import GrantConfirmScreen
from tui.screens.history import HistoryEntry
from tui.screens.queue import QueueScreen

#: Outcomes of decisions the person keyed: the app's history already has them from `AskDecided`.
PERSON_OUTCOMES = frozenset({"user", "user_grant", "session_grant"})


WHO = {"approved_by_serving_grant": "grant"}


class HumanChanged(Message):
    """An ask arrived for the person, was withdrawn by its child, or was decided (`HumanAuthorizer`)."""

    def __init__(self, event: HumanEvent) -> None:
        super().__init__()
        self.event = event


class ServingChanged(Message):
    """The serving core answered, set a file aside, or stopped or resumed serving a session."""

    def __init__(self, event: ServeEvent) -> None:
        super().__init__()
        self.event = event


class CoreEvents(Attention):
    """The event handlers of `AuthorizerApp` (its base class)."""

    core: ServingCore
    queue: QueueScreen
    history: list[HistoryEntry]
    clock: Callable[[], float]
    _new_asks: list[Ask]
    _attention_timer: Timer | None

    def listen(self) -> None:
        """Receive the core's events as Messages from now on (`post_message` is thread safe)."""
        def human(event: HumanEvent) -> None:
            self.post_message(HumanChanged(event))

        def serving(event: ServeEvent) -> None:
            self.post_message(ServingChanged(event))

        self.human.subscribe(human)
        self.core.subscribe(serving)

    def on_human_changed(self, message: HumanChanged) -> None:
        self._on_human(message.event)

    def on_serving_changed(self, message: ServingChanged) -> None:
        self._on_serve(message.event)

    def _on_human(self, event: HumanEvent) -> None:
        if isinstance(event, AskDecided):
            reason = event.response.denial_reason
            detail = f"reason: {safe_plain(reason, 120)}" if reason else ""
            if event.response.session_grant_width == "family":
                detail = "both directions (read and write)"
            self.history.append(HistoryEntry(self.clock(), event.kind, WHO.get(event.kind, "you"),
                                             ask_label(event.ask), detail))
        elif isinstance(event, AskWithdrawn):
            self.history.append(HistoryEntry(self.clock(), "withdrawn", "child", ask_label(event.ask),
                                             "the child stopped waiting; never answered"))
            self.notify(f"{ask_label(event.ask)}\nThe child stopped waiting; it can no longer be answered "
                        "(not a denial).", title="Ask withdrawn", severity="warning", markup=False, timeout=8)
            self._abandon_modals(event.ask)
        self.queue.handle_event(event)
        if isinstance(event, AskAdded):
            self._new_asks.append(event.ask)
            if self._attention_timer is None:
                self._attention_timer = self.set_timer(ATTENTION_COALESCE_S, self._flush_attention)

    def _abandon_modals(self, ask: Ask) -> None:
        screen = self.screen
        if isinstance(screen, AskModal) and screen.ask_key == ask.key:
            if isinstance(screen, GrantConfirmScreen):
                screen.dismiss(False)
            else:
                screen.dismiss(None)

    def _on_serve(self, event: ServeEvent) -> None:
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
            granted = source is not None and source.kind == "session_approval"
            who = "grant" if granted else event.outcome or "?"
            self.history.append(HistoryEntry(self.clock(), event.response.state, who, label))
        elif event.kind == "quarantined":
            name = safe_plain(event.key.name, 60)
            self.history.append(HistoryEntry(self.clock(), "quarantined", "core", name,
                                             safe_plain(event.reason, 160)))
            self.notify(f"Unusable request file set aside: {safe_plain(event.reason, 200)}",
                        title="Request quarantined", severity="warning", markup=False)
        elif event.kind == "forged":
            self.history.append(HistoryEntry(self.clock(), "forged", "someone else",
                                             safe_plain(event.key.name, 60), safe_plain(event.reason, 160)))
            self.notify(safe_plain(event.reason, 300), title="Forged response", severity="error",
                        markup=False, timeout=30)
        elif event.kind == "not_serving":
            self.sub_title = f"NOT SERVING {safe_plain(event.key.session_id, 40)}"
            self.notify(f"Session {safe_plain(event.key.session_id, 60)} cannot be served: "
                        f"{safe_plain(event.reason, 200)}", title="Not serving", severity="error",
                        markup=False, timeout=60)
        elif event.kind == "serving_again":
            if self.sub_title.startswith("NOT SERVING "):
                self.sub_title = ""
            self.notify(f"Serving session {safe_plain(event.key.session_id, 60)} again.", markup=False)
        elif event.kind == "unsafe_folder":
            self.history.append(HistoryEntry(self.clock(), "unsafe folder", "core",
                                             safe_plain(event.key.session_id, 60),
                                             safe_plain(event.reason, 200)))
            self.notify(f"{safe_plain(event.reason, 300)}\nNothing is read or written through it.",
                        title="Session folder refused", severity="error", markup=False, timeout=15)
