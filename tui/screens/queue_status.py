"""The queue screen's status line and key legend: notes about the asks (decided, withdrawn, the
outcome of a key), and the legend of what the keys do now, re-rendered when the keys start to count.

The base of `QueueView` (`queue_view.py`), which owns the selection and the paint they describe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from core.clock import Clock
from core.person import AskDecided, AskWithdrawn
from core.serving.asks import Ask, AskKey
from tui.keysafety import Armed, KeySafety
from tui.render.facts import ask_label
from tui.render.styles import DIM, WARN
from tui.sanitize import safe_plain, visible
from tui.screens.queue_legend import legend_content
from tui.settings import UiSettings

if TYPE_CHECKING:
    from textual.timer import Timer

STATUS_TTL_S = 15.0
COMPACT_WIDTH = 100
COMPACT_HEIGHT = 30
KIND_WORDS = {
    "approved": "Approved once",
    "approved_for_session": "Approved for the subagent's session",
    "approved_for_serving_session": "Approved and recorded a whole-session grant",
    "approved_by_serving_grant": "Approved by the whole-session grant",
    "denied": "Denied",
    "denied_with_reason": "Denied with reason",
}

# Below this many columns the footer drops its padding, so every key fits at 80x24.
COMPACT_FOOTER_BELOW = 110


class QueueStatus(Screen[None]):
    """The status line and the legend of the queue screen (`QueueView` sets what they read)."""

    safety: KeySafety
    settings: UiSettings
    ticks: Clock
    marked: dict[AskKey, None]
    _composed: bool
    current_ask: Callable[[], Ask | None]

    def __init__(self, id: str) -> None:
        super().__init__(id=id)
        self._ready_timer: Timer | None = None
        self._status_about: AskKey | None = None
        self._status_until: float | None = None
        self._legend_shown: Content | None = None
        self._key_labels: tuple[object, dict[str, str]] | None = None
        self._status_shown = False

    @property
    def compact(self) -> bool:
        """A small terminal (80×24 is first class): no toasts over the ask, short legend words."""
        return self.size.width < COMPACT_WIDTH or self.size.height < COMPACT_HEIGHT

    def on_resize(self) -> None:
        self._render_legend()
        self.query_one(Footer).compact = self.size.width < COMPACT_FOOTER_BELOW

    @property
    def armed(self) -> Armed | None:
        """The armed first press, if any."""
        return self.safety.armed

    def note_event(self, event: AskWithdrawn | AskDecided) -> None:
        """The status line's note about an ask withdrawn or decided."""
        if isinstance(event, AskWithdrawn):
            self.set_status(Content.assemble(
                ("⚠ Withdrawn by the child (it stopped waiting): ", WARN),
                (ask_label(event.ask), ""),
                (" — not answered, and not a denial.", DIM),
            ), ttl=STATUS_TTL_S)
        elif isinstance(event, AskDecided):
            line = Content.assemble((KIND_WORDS.get(event.kind, event.kind) + ": ", "bold"),
                                    (ask_label(event.ask), ""))
            if event.response.denial_reason:
                line = Content.assemble(line, (" — reason: ", DIM),
                                        (safe_plain(event.response.denial_reason, 80), ""))
            self.set_status(line, ttl=STATUS_TTL_S)

    def _legend_when_ready(self) -> None:
        """Re-render the legend when the keys start to count (cosmetic: the safety decides)."""
        if self._ready_timer is not None:
            self._ready_timer.stop()
            self._ready_timer = None
        ready = self.safety.ready_at()
        if ready is not None and not self.safety.accepting():
            self._ready_timer = self.set_timer(max(0.0, ready - self.safety.clock()) + 0.01,
                                               self._render_legend)
        self._render_legend()

    def _tick_status(self, ask: Ask | None) -> None:
        """Once a second: an armed first press that expired says so; a note past its time goes."""
        if self.safety.expire():
            self.set_status(Content.styled("First press expired; press again to arm.", DIM),
                            about=ask.key if ask is not None else None, ttl=STATUS_TTL_S)
            self._render_legend()
        if self._status_until is not None and self.ticks.monotonic() > self._status_until:
            self.set_status("")

    def set_status(self, content: Content | str, *, about: AskKey | None = None, ttl: float | None = None,
                   ) -> None:
        """The line under the ask. `about`: cleared when another ask is selected; `ttl`: after seconds."""
        if not self._composed:
            return
        self._status_about = about
        self._status_until = None if ttl is None else self.ticks.monotonic() + ttl
        if content or self._status_shown:
            literal = visible(content if isinstance(content, Content) else Content(content))
            self.query_one("#status", Static).update(literal)
        self._status_shown = bool(content)

    def say_after_events(self, content: Content | str, *, about: AskKey | None = None,
                         ttl: float | None = None) -> None:
        """A note about the outcome of this screen's own call to the person's API: shown after the
        events that call caused, which are Messages already queued to the app (never overwritten by them)."""
        self.app.call_later(self.set_status, content, about=about, ttl=ttl)

    @property
    def status_text(self) -> str:
        return str(self.query_one("#status", Static).render())

    def key_for(self, action: str) -> str:
        """The key currently bound to `action` (after the user's keymap), for messages."""
        return self.key_labels().get(action, "?")

    def key_labels(self) -> dict[str, str]:
        """Every action's key as shown; computed once per keymap (the legend asks on every move)."""
        keymap = self.app._keymap
        if self._key_labels is None or self._key_labels[0] is not keymap:
            labels: dict[str, str] = {}
            bindings = self._bindings.copy()
            bindings.apply_keymap(keymap)
            for _, binding in bindings:
                labels.setdefault(binding.action, self.app.get_key_display(binding))
            self._key_labels = (keymap, labels)
        return self._key_labels[1]

    def _render_legend(self) -> None:
        if not self._composed:
            return
        ask = self.current_ask()
        armed = self.safety.armed
        legend = legend_content(
            ask, grace=ask is not None and not self.safety.accepting(),
            armed=armed.action if armed is not None else None, double_press=self.settings.double_press,
            labels=self.key_labels(), marked=len(self.marked), width=max(20, self.size.width - 2))
        if legend != self._legend_shown:  # moving through the queue mostly leaves it as it is
            self._legend_shown = legend
            self.query_one("#legend", Static).update(legend)

