"""The queue screen's state: the table and the selected ask in sync with the pending asks, and the
paint of the selected ask (the key safety reads both).

Its base, `queue_status.py`, holds the status line and the legend; navigation, decisions and batches
are the subclasses in `queue_nav.py`, `queue_decide.py` and `queue.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Footer, Header, Input, Static

from core.clock import SYSTEM_CLOCK, Clock
from core.person import AskAdded, AskDecided, AskWithdrawn, HumanAuthorizer, HumanEvent
from core.serving.asks import Ask, AskKey
from tui.keysafety import KeySafety
from tui.render.facts import ask_has_hidden
from tui.sanitize import safe_plain
from tui.screens.queue_status import QueueStatus
from tui.settings import UiSettings
from tui.widgets.ask_detail import AskDetail
from tui.widgets.ask_filter import AskFilter
from tui.widgets.asks_table import AsksTable

DECISIONS = frozenset(
    {"approve", "approve_session", "approve_session_both", "approve_serving", "deny", "deny_reason"}
)
BATCH = frozenset({"batch"})
GUARDED = DECISIONS | BATCH
FILTER_HINT = "filter: agent:NAME session:ID surface:S  free text  (enter keeps it, esc clears it)"


class QueueView(QueueStatus):
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
        super().__init__("queue")
        self.human = human
        self.settings = settings
        self.clock = clock
        self.safety = safety
        self.key_time = key_time
        self.ticks = ticks
        self.selected: AskKey | None = None
        self.marked: dict[AskKey, None] = {}  # ordered set
        self.ask_filter = AskFilter()
        self._busy = False
        self._composed = False
        self.on_shown: Callable[[AskKey], None] | None = None
        self.sessions_served: Callable[[], int] = lambda: 1
        self._refresh_pending = False
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

    def on_mount(self) -> None:
        self._composed = True
        self._show_filter(False)
        self._title_table()
        self.set_interval(1.0, self._tick)
        self.refresh_queue()
        self._render_legend()

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

    def handle_event(self, event: HumanEvent) -> None:
        """Every `HumanAuthorizer` event, in order, from the app's message loop (`HumanChanged`)."""
        if isinstance(event, AskWithdrawn | AskDecided):
            self.marked.pop(event.ask.key, None)
            self.note_event(event)
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
        self._tick_status(ask)

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
