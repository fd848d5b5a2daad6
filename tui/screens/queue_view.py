"""The queue screen's state: the table and the selected ask in sync with the pending asks, the
status line, the paint of the selected ask, and the legend.

Size: over 250 lines on purpose: selection, paint and status change together (the key safety reads
them), so they stay in one class; navigation, decisions and batches are the subclasses in
`queue_nav.py`, `queue_decide.py` and `queue.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from core.asks import Ask, AskKey
from core.clock import SYSTEM_CLOCK, Clock
from core.human import (
    AskAdded,
    AskDecided,
    AskWithdrawn,
    HumanAuthorizer,
    HumanEvent,
)
from core.keysafety import Armed, KeySafety
from tui.render.facts import (
    ask_has_hidden,
    ask_label,
)
from tui.render.styles import DIM, WARN
from tui.sanitize import safe_plain
from tui.screens.queue_legend import legend_content
from tui.settings import UiSettings
from tui.widgets.ask_detail import AskDetail
from tui.widgets.ask_filter import AskFilter
from tui.widgets.asks_table import AsksTable

if TYPE_CHECKING:
    from textual.timer import Timer

DECISIONS = frozenset(
    {"approve", "approve_session", "approve_session_both", "approve_serving", "deny", "deny_reason"}
)
BATCH = frozenset({"batch"})
GUARDED = DECISIONS | BATCH
STATUS_TTL_S = 15.0
FILTER_HINT = "filter: agent:NAME session:ID surface:S  free text  (enter keeps it, esc clears it)"
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



class QueueView(Screen[None]):
    """Pending asks in `createdAt` order, the selected one in full, the status line and the legend."""

    AUTO_FOCUS = ""  # the keys belong to the queue; the filter field takes focus only on `/`

    def __init__(
        self,
        human: HumanAuthorizer,
        settings: UiSettings,
        clock: Callable[[], float],
        safety: KeySafety,
        key_time: Callable[[], float],
        ticks: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`clock` is wall time (ages); `safety` and `key_time` (the current key's read time) share
        the monotonic clock; `ticks` times the status line's notes."""
        super().__init__(id="queue")
        self.human = human
        self.settings = settings
        self.clock = clock
        self.safety = safety
        self.key_time = key_time
        self.ticks = ticks
        self.selected: AskKey | None = None
        self._ready_timer: Timer | None = None
        self.marked: dict[AskKey, None] = {}  # ordered set
        self.ask_filter = AskFilter()
        self._busy = False
        self._composed = False
        self.on_shown: Callable[[AskKey], None] | None = None
        self.sessions_served: Callable[[], int] = lambda: 1
        self._refresh_pending = False
        self._status_about: AskKey | None = None
        self._status_until: float | None = None
        self._legend_shown: Content | None = None
        self._key_labels: tuple[object, dict[str, str]] | None = None
        self._status_shown = False
        self._bindings_for: tuple[bool, bool] | None = None

    # -- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with Vertical(id="queue-body"):
            yield Input(placeholder=FILTER_HINT, id="queue-filter", select_on_focus=False)
            yield AsksTable(id="asks")
            yield AskDetail(id="detail")
            yield Static(id="status", markup=False)
            yield Static(id="legend", markup=False)
        yield Footer(show_command_palette=False)

    @property
    def table(self) -> AsksTable:
        return self.query_one(AsksTable)

    @property
    def detail(self) -> AskDetail:
        return self.query_one(AskDetail)

    @property
    def filter_input(self) -> Input:
        return self.query_one("#queue-filter", Input)

    @property
    def compact(self) -> bool:
        """A small terminal (80×24 is first class): no toasts over the ask, short legend words."""
        return self.size.width < COMPACT_WIDTH or self.size.height < COMPACT_HEIGHT

    def on_mount(self) -> None:
        self._composed = True
        self._show_filter(False)
        self._title_table()
        self.set_interval(1.0, self._tick)
        self.refresh_queue()
        self._render_legend()

    def on_resize(self) -> None:
        self._render_legend()
        self.query_one(Footer).compact = self.size.width < COMPACT_FOOTER_BELOW

    def on_screen_resume(self) -> None:
        # Coming back from another screen or a modal: what is visible is new to the eye (and a
        # session may have been adopted meanwhile).
        self.refresh_queue()
        self._show_selected()

    # -- state ------------------------------------------------------------------------------------

    def current_ask(self) -> Ask | None:
        return None if self.selected is None else self.human.get(self.selected)

    def visible_asks(self) -> list[Ask]:
        """What the table shows: every pending ask the filter lets through, in `createdAt` order."""
        asks = self.human.pending()
        return [a for a in asks if self.ask_filter.matches(a)] if self.ask_filter.active else asks

    def _show_filter(self, shown: bool) -> None:
        """A hidden filter field is also disabled: it can never hold focus and swallow keys unseen."""
        field = self.filter_input
        field.display = shown
        field.disabled = not shown

    @property
    def typing(self) -> bool:
        """The filter field has focus: every key types into it and none decides."""
        return self._composed and self.focused is self.filter_input

    @property
    def armed(self) -> Armed | None:
        """The armed first press, if any."""
        return self.safety.armed

    def handle_event(self, event: HumanEvent) -> None:
        """Every `HumanAuthorizer` event, in order, from the app's message loop (`HumanChanged`)."""
        if isinstance(event, AskWithdrawn):
            self.marked.pop(event.ask.key, None)
            self.set_status(Content.assemble(
                ("⚠ Withdrawn by the child (it stopped waiting): ", WARN),
                (ask_label(event.ask), ""),
                (" — not answered, and not a denial.", DIM),
            ), ttl=STATUS_TTL_S)
        elif isinstance(event, AskDecided):
            self.marked.pop(event.ask.key, None)
            line = Content.assemble((KIND_WORDS.get(event.kind, event.kind) + ": ", "bold"),
                                    (ask_label(event.ask), ""))
            if event.response.denial_reason:
                line = Content.assemble(line, (" — reason: ", DIM),
                                        (safe_plain(event.response.denial_reason, 80), ""))
            self.set_status(line, ttl=STATUS_TTL_S)
        if isinstance(event, AskAdded):
            # Arrivals come in bursts: sync the table once per burst, not once per ask.
            if not self._refresh_pending:
                self._refresh_pending = True
                self.call_later(self._refresh_after_arrivals)
            return
        self.refresh_queue()

    def _refresh_after_arrivals(self) -> None:
        self._refresh_pending = False
        self.refresh_queue()
        if self.is_current:
            self._render_legend()

    def refresh_queue(self) -> None:
        """Sync rows with the shown asks; keep the cursor on the same ask whenever it is still shown."""
        if not self._composed:
            return
        table = self.table
        table.show_columns(["session"] if self.sessions_served() > 1 else [])
        before = self.selected
        before_index = None if before is None else table.index_of(before)
        table.sync(self.visible_asks(), self.clock())
        table.set_marked(set(self.marked))
        keys = table.ask_keys
        if not keys:
            new: AskKey | None = None
        elif before is not None and before in keys:
            new = before
        elif before_index is not None:
            new = keys[min(before_index, len(keys) - 1)]  # the ask that took its place
        else:
            new = keys[0]
        if new is not None:
            index = keys.index(new)
            if table.cursor_row != index:
                table.move_cursor(row=index, animate=False, scroll=True)
        self._title_table()
        if new != before:
            self._select(new)
        elif new is not None:
            # Same ask on screen: only its position and the counts change.
            self.detail.update_header(self.current_ask(), self.clock(), keys.index(new) + 1, len(keys))
            self._subtitle()
        else:
            self._render_detail()

    def _title_table(self) -> None:
        title = "Pending asks — oldest first"
        if self.ask_filter.active:
            shown, total = self.table.row_count, len(self.human.pending())
            title = f"Pending asks — filter: {safe_plain(self.filter_input.value, 40)} ({shown} of {total})"
        self.table.border_title = title
        marked = len(self.marked)
        self.table.border_subtitle = f"{marked} marked" if marked else ""

    def _subtitle(self) -> None:
        shown = self.table.row_count
        total = len(self.human.pending())
        text = f"{total} pending" if total else "no pending asks"
        if self.ask_filter.active:
            text += f" · {shown} shown"
        self.sub_title = text

    def _select(self, key: AskKey | None) -> None:
        self.selected = key
        if self._status_about is not None and self._status_about != key:
            self.set_status("")  # a note about another ask no longer applies
        self._render_detail()
        self._show_selected()

    def _show_selected(self) -> None:
        """Tell the safety what is selected; its keys count once a frame showing it is painted."""
        ask = self.current_ask()
        self.safety.show(None if ask is None else ask.key, hidden=ask is not None and ask_has_hidden(ask))
        if ask is not None and self._composed:
            self.detail.expect_paint(ask.key, self._painted)
        self._render_legend()
        # The footer rebuilds itself on every bindings refresh: only when what the keys may do changed.
        enabled = (ask is not None, self.typing)
        if enabled != self._bindings_for:
            self._bindings_for = enabled
            self.refresh_bindings()

    def _painted(self, token: Hashable) -> None:
        self.safety.painted(token)
        self._legend_when_ready()

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

    def _tick(self) -> None:
        now = self.clock()
        asks = self.visible_asks()
        if [a.key for a in asks] != self.table.ask_keys:
            # Its event is still on the way: the rows change with the selection, in one place.
            self.refresh_queue()
        else:
            self.table.sync(asks, now)
        keys = self.table.ask_keys
        ask = self.current_ask()
        if ask is not None and ask.key in keys:
            self.detail.update_header(ask, now, keys.index(ask.key) + 1, len(keys))
        if self.safety.expire():
            self.set_status(Content.styled("First press expired; press again to arm.", DIM),
                            about=ask.key if ask is not None else None, ttl=STATUS_TTL_S)
            self._render_legend()
        if self._status_until is not None and self.ticks.monotonic() > self._status_until:
            self.set_status("")

    def _render_detail(self) -> None:
        keys = self.table.ask_keys
        ask = self.current_ask()
        position = keys.index(ask.key) + 1 if ask is not None and ask.key in keys else 0
        self.detail.show(ask, self.clock(), position, len(keys))
        if ask is not None and self.on_shown is not None:
            # After the frame that shows it: truer "shown" time, and the write is off the key-to-paint path.
            self.call_after_refresh(self.on_shown, ask.key)
        self._render_legend()
        self._subtitle()

    def set_status(self, content: Content | str, *, about: AskKey | None = None, ttl: float | None = None,
                   ) -> None:
        """The line under the ask. `about`: cleared when another ask is selected; `ttl`: after seconds."""
        if not self._composed:
            return
        self._status_about = about
        self._status_until = None if ttl is None else self.ticks.monotonic() + ttl
        if content or self._status_shown:
            self.query_one("#status", Static).update(content)
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

