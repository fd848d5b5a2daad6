"""The main screen: pending asks oldest first, the selected one in full, the decision keys.

Guards against accidental approval (`docs/design/contract.md` § Approval safety): the queue never reorders
under the cursor; every timing and press rule (grace after the ask is painted, double press, hidden
characters, modal grace, armed-press expiry) is `tui.keysafety.KeySafety`, fed from here: the
selection, the paint of the ask's header (`PaintProbe`), and each key's read time. `w` and `r` open
an explicit confirmation step; `esc` never decides. Decision bindings are hidden from the clickable
Footer and shown in a plain legend (`KeyLegend`) instead, so no mouse path decides an ask.

The screen, read top to bottom: its layout and its parts (the table, the detail, the filter field,
the `StatusLine` and the `KeyLegend` it tells what to paint); the state (the table and the selected
ask in sync with the pending asks, the paint the key safety waits for); moving and filtering;
single decisions (the key safety first, then one `Person` call); batches.

Size: one screen, one idea — the decision surface and every guard on it; its parts that paint
themselves are widgets already (`StatusLine`, `KeyLegend`, the table, the detail).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import Screen, ScreenResultCallbackType
from textual.widgets import DataTable, Footer, Header, Input

from core.judging.model_judge import JudgeReview
from core.person import (
    AskAdded,
    AskDecided,
    AskWithdrawn,
    DecisionRefused,
    GrantRefused,
    Person,
    PersonEvent,
    proven_direction,
)
from core.vocabulary.asks import Ask, AskKey
from core.wire.response import GrantWidth
from tui.actions import DECIDING, QUEUE, bindings
from tui.heap import Heap
from tui.keysafety import Armed, KeySafety, Verdict
from tui.render.ask import WIDE_STYLE, grant_width
from tui.render.ask_facts import LINE_LIMIT, VALUE_LIMIT, ask_has_hidden, ask_label, child_values
from tui.render.styles import DIM, WARN
from tui.sanitize import safe_plain
from tui.screens.ask_steps import ExpandScreen, ReasonScreen
from tui.screens.batch_preview import BatchPreviewScreen
from tui.screens.grant_steps import GrantConfirmScreen, GrantNoFactsScreen, GrantRefusedScreen
from tui.ui_settings import UiSettings
from tui.widgets.ask_detail import AskDetail
from tui.widgets.ask_filter import AskFilter, FilterIndex
from tui.widgets.asks_table import AsksTable
from tui.widgets.key_legend import KeyLegend
from tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from textual.timer import Timer

R = TypeVar("R")
SESSION_OF = attrgetter("key.session_id")

STATUS_TTL_S = 15.0
#: New asks join the table at most this often while they keep coming (a burst in a few batches).
ARRIVALS_EVERY_S = 0.2
#: A burst is over when no ask came for this long (`Heap.burst_over`).
BURST_OVER_S = 1.0
COMPACT_WIDTH = 100
COMPACT_HEIGHT = 30
# Below this many columns the footer drops its padding, so every key fits at 80x24.
COMPACT_FOOTER_BELOW = 110
FILTER_HINT = "filter: agent:NAME session:ID surface:S  free text  (enter keeps it, esc clears it)"
KIND_WORDS = {
    "approved": "Approved once",
    "approved_for_session": "Approved for the subagent's session",
    "approved_for_serving_session": "Approved and recorded a whole-session grant",
    "approved_by_serving_grant": "Approved by the whole-session grant",
    "approved_by_written_rule": "Approved by the rule you wrote",
    "denied": "Denied",
    "denied_with_reason": "Denied with reason",
}
VERBS = {action.name: action.verb for action in QUEUE if action.verb is not None}


def recorded_patterns(ask: Ask) -> Content:
    """What the child records on `s`: its own pattern(s), not the value, and how wide each is."""
    home = str(Path.home())
    parts: list[Content] = []
    for grant in Person.serving_grants_of(ask):
        parts.append(Content.assemble((" — the child records ", DIM), (safe_plain(grant.surface, 40), ""),
                                      (" ", ""), (repr(safe_plain(grant.pattern, 80)), "bold")))
        wide = grant_width(ask, grant.surface, grant.pattern, home)
        if wide is not None:
            parts.append(Content.styled(f" ⚠ WIDE: {wide}", WIDE_STYLE))
    return Content.assemble(*parts)


def batch_exclusion(ask: Ask) -> str | None:
    """Why an ask may not be decided in a batch (it needs a look of its own), or None."""
    if ask_has_hidden(ask):
        return "it contains hidden characters"
    for value in child_values(ask):
        if len(value) > VALUE_LIMIT or value.count("\n") >= LINE_LIMIT:
            return "a value is too long to show whole in a list"
    return None


class QueueScreen(Screen[None]):
    """Pending asks in `createdAt` order, the selected one in full, the status line, the legend and the
    decision keys. Every binding has an id (see `App.set_keymap`); they are `tui.actions.QUEUE`."""

    AUTO_FOCUS = ""  # the keys belong to the queue; the filter field takes focus only on `/`
    BINDINGS: ClassVar[list[BindingType]] = bindings(QUEUE)

    class AskShown(Message):
        """The selected ask has been on screen (posted after the frame that shows it)."""

        def __init__(self, key: AskKey) -> None:
            super().__init__()
            self.key = key

    def __init__(
        self,
        person: Person,
        settings: UiSettings,
        clock: Callable[[], float],
        safety: KeySafety,
        key_time: Callable[[], float],
        sessions_served: Callable[[], int] = lambda: 1,
        serving: Callable[[], Content] | None = None,
        advice: Callable[[Ask], JudgeReview | None] | None = None,
    ) -> None:
        """`clock` is wall time (ages); `safety` and `key_time` (the current key's read time) share
        the monotonic clock; `sessions_served` counts the sessions (more than one: a session column);
        `serving` says what the empty queue serves."""
        super().__init__(id="queue")
        self.person = person
        self.settings = settings
        self.clock = clock
        self.safety = safety
        self.key_time = key_time
        self.sessions_served = sessions_served
        self.serving = serving
        self.advice = advice
        self.selected: AskKey | None = None
        self.marked: dict[AskKey, None] = {}  # ordered set
        self.ask_filter = AskFilter()
        self.heap = Heap()  # thousands pending: the collector's full passes need not walk them
        self._index = FilterIndex()  # the filter's index: each pending ask's fields, made as it comes
        self._sessions_of: tuple[Sequence[Ask] | None, bool] = (None, False)  # pending -> several sessions?
        self._pending_total = 0
        self._arrivals_at = 0.0  # when the table last took in a batch of arrivals (monotonic)
        self._busy = False
        self._composed = False
        self._refresh_pending = False
        self._bindings_for: tuple[bool, bool, bool] | None = None
        self._ready_timer: Timer | None = None
        self._key_labels: tuple[object, dict[str, str]] | None = None
        self._detail_ask: Ask | None = None  # the ask object the detail shows
        #: The ask selected in place of one withdrawn while it was selected, and that withdrawal: a key
        #: meant for the gone ask and ignored on this one says why (`_allowed`).
        self._in_place_of: tuple[AskKey, AskWithdrawn] | None = None

    # -- layout and parts -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with Vertical(id="queue-body"):
            yield Input(placeholder=FILTER_HINT, id="queue-filter", select_on_focus=False)
            yield AsksTable(id="asks")
            yield AskDetail(id="detail", serving=self.serving, advice=self.advice)
            yield StatusLine(id="status")
            yield KeyLegend(id="legend")
        yield Footer(show_command_palette=False)

    @property
    def table(self) -> AsksTable:
        return self.query_one(AsksTable)

    @property
    def detail(self) -> AskDetail:
        return self.query_one(AskDetail)

    @property
    def status_line(self) -> StatusLine:
        return self.query_one(StatusLine)

    @property
    def filter_input(self) -> Input:
        return self.query_one("#queue-filter", Input)

    @property
    def ready(self) -> bool:
        """Composed and mounted: its parts can be queried."""
        return self._composed

    def on_mount(self) -> None:
        self._composed = True
        self._show_filter(False)
        self._title_table()
        self.set_interval(1.0, self._tick)
        self.refresh_queue()
        self._render_legend()

    def on_unmount(self) -> None:
        self.heap.settle()  # the app ends: what was frozen is the collector's again

    def on_screen_resume(self) -> None:
        # Coming back from another screen or a modal: what is visible is new to the eye (and a
        # session may have been adopted meanwhile).
        self._keys_shown(True)
        self.refresh_queue()
        self.show_selected()

    def on_screen_suspend(self) -> None:
        """Under a dialog the queue's keys are not shown: there `y` means the dialog's, not this legend's."""
        self._keys_shown(False)

    def _keys_shown(self, shown: bool) -> None:
        if self._composed:
            self.query_one(KeyLegend).display = shown
            self.query_one(Footer).display = shown

    @property
    def compact(self) -> bool:
        """A small terminal (80×24 is first class): no toasts over the ask, short legend words."""
        return self.size.width < COMPACT_WIDTH or self.size.height < COMPACT_HEIGHT

    def on_resize(self) -> None:
        self._render_legend()
        self.detail.set_compact(self.compact)
        self.query_one(Footer).compact = self.size.width < COMPACT_FOOTER_BELOW

    # -- the status line ----------------------------------------------------------------------------

    def set_status(self, content: Content | str, *, about: AskKey | None = None, ttl: float | None = None,
                   ) -> None:
        """The line under the ask. `about`: cleared when another ask is selected; `ttl`: after seconds."""
        if self._composed:
            self.status_line.say(content, about=about, ttl=ttl)

    def say_after_events(self, content: Content | str, *, about: AskKey | None = None,
                         ttl: float | None = None) -> None:
        """A note about the outcome of this screen's own call to the person's API: shown after the
        events that call caused, which are Messages already queued to the app (never overwritten by them)."""
        self.app.call_later(self.set_status, content, about=about, ttl=ttl)

    @property
    def status_text(self) -> str:
        return self.status_line.text

    def note_event(self, event: AskWithdrawn | AskDecided) -> None:
        """The status line's note about an ask withdrawn or decided."""
        if isinstance(event, AskWithdrawn) and event.reason is not None:
            self.set_status(Content.assemble(
                ("⚠ Not answered by this node: ", WARN), (ask_label(event.ask), ""),
                (f" — {safe_plain(event.reason, 80)}.", DIM),
            ), ttl=STATUS_TTL_S)
        elif isinstance(event, AskWithdrawn):
            self.set_status(Content.assemble(
                ("⚠ Withdrawn by the child (it stopped waiting): ", WARN),
                (ask_label(event.ask), ""),
                (" — not answered, and not a denial.", DIM),
            ), ttl=STATUS_TTL_S)
        elif isinstance(event, AskDecided):
            words = KIND_WORDS.get(event.kind, event.kind)
            if event.response.session_grant_width == "family":
                words += ", both directions"  # `b`: the grant reaches reads and writes alike
            line = Content.assemble((words + ": ", "bold"), (ask_label(event.ask), ""))
            if event.kind == "approved_for_session":
                line = Content.assemble(line, recorded_patterns(event.ask))  # issue 34 finding 4
            if event.response.denial_reason:
                line = Content.assemble(line, (" — reason: ", DIM),
                                        (safe_plain(event.response.denial_reason, 80), ""))
            self.set_status(line, ttl=STATUS_TTL_S)

    # -- the legend -------------------------------------------------------------------------------

    @property
    def armed(self) -> Armed | None:
        """The armed first press, if any."""
        return self.safety.armed

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
        self.query_one(KeyLegend).show_keys(
            ask, grace=ask is not None and not self.safety.accepting(),
            armed=armed.action if armed is not None else None, double_press=self.settings.double_press,
            labels=self.key_labels(), marked=len(self.marked), width=max(20, self.size.width - 2))

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

    # -- state: the table and the selected ask in sync with the pending asks ------------------------

    def current_ask(self) -> Ask | None:
        return None if self.selected is None else self.person.get(self.selected)

    def shown_ask(self) -> Ask | None:
        """The very ask the detail shows (what a decision key decides), if it is still the one pending
        under the selected name; None while another ask stands there and is not yet shown."""
        ask = self._detail_ask
        return ask if ask is not None and ask.key == self.selected and self.current_ask() is ask else None

    def visible_asks(self, pending: Sequence[Ask] | None = None) -> Sequence[Ask]:
        """What the table shows: every pending ask the filter lets through, in `createdAt` order.

        The filter searches an index of each ask's lower-cased fields, kept as the asks come and go
        (a keystroke with thousands pending only searches strings)."""
        asks = self.person.ordered() if pending is None else pending
        self._index.update(asks)
        if not self.ask_filter.active:
            return asks
        return self._index.select(self.ask_filter)

    def _several_sessions(self, pending: Sequence[Ask]) -> bool:
        """Asks from more than one session are pending (worked out once per change of the asks)."""
        if self._sessions_of[0] is not pending:
            self._sessions_of = (pending, len(set(map(SESSION_OF, pending))) > 1)  # one C loop
        return self._sessions_of[1]

    def _show_filter(self, shown: bool) -> None:
        """A hidden filter field is also disabled: it can never hold focus and swallow keys unseen."""
        field = self.filter_input
        field.display = shown
        field.disabled = not shown

    @property
    def typing(self) -> bool:
        """The filter field has focus: every key types into it and none decides."""
        return self._composed and self.focused is self.filter_input

    def handle_events(self, events: Sequence[PersonEvent]) -> None:
        """Every `Person` event, in order, from the app's message loop: a run of them (`PersonChanged`)
        at once. Withdrawals and decisions change the table once for the run (thousands of children
        giving up together are one pass, not one per ask); no key is read in between."""
        gone: AskWithdrawn | None = None  # the selected ask's withdrawal: what the person was looking at
        left = False
        for event in events:
            if isinstance(event, AskAdded):
                self._arrived(event.ask)
                continue
            if gone is None and isinstance(event, AskWithdrawn) and event.ask.key == self.selected:
                gone = event
            self.marked.pop(event.ask.key, None)
            self.note_event(event)
            left = True
        if left:
            self.refresh_queue()
            if gone is not None and self.selected is not None:
                self._in_place_of = (self.selected, gone)

    def _arrived(self, ask: Ask) -> None:
        self._index.add((ask,))  # its filter fields now, not on the first key
        # Arrivals come in bursts: the table takes them in batches, at once when none came in the
        # last `ARRIVALS_EVERY_S`, else at the end of that time (thousands in a few passes).
        if not self._refresh_pending:
            self._refresh_pending = True
            wait = self._arrivals_at + ARRIVALS_EVERY_S - time.monotonic()
            if wait > 0:
                self.set_timer(wait, self._refresh_after_arrivals)
            else:
                self.call_later(self._refresh_after_arrivals)

    def _refresh_after_arrivals(self) -> None:
        self._refresh_pending = False
        self._arrivals_at = time.monotonic()
        self.refresh_queue()
        self.set_timer(BURST_OVER_S, self._burst_over)
        if self.is_current:
            self._render_legend()

    def _burst_over(self) -> None:
        """No arrival since the last batch for `BURST_OVER_S`: what the burst left is frozen too."""
        if time.monotonic() - self._arrivals_at >= BURST_OVER_S and not self._refresh_pending:
            self.heap.burst_over(self.person.count())

    def refresh_queue(self) -> None:
        """Sync rows with the shown asks; keep the cursor on the same ask whenever it is still shown."""
        if not self._composed:
            return
        table = self.table
        pending = self.person.ordered()  # the same tuple until an ask comes or goes: no copy, no sort
        self._pending_total = len(pending)
        self.heap.pending(len(pending))
        shown = self.visible_asks(pending)
        # Several served sessions, or asks pending from several (a broker's carry their host and
        # session): the column stays while a filter shows one session's asks.
        several = self.sessions_served() > 1 or self._several_sessions(pending)
        table.show_columns(["session"] if several else [])
        before = self.selected
        before_index = None if before is None else table.index_of(before)
        table.sync(shown, self.clock(), pending)
        table.set_marked(set(self.marked))
        keys = table.ask_keys
        at = None if before is None else table.index_of(before)
        if not keys:
            new: AskKey | None = None
        elif before is not None and at is not None:
            new = before
        elif before_index is not None:
            new = keys[min(before_index, len(keys) - 1)]  # the ask that took its place
        else:
            new = keys[0]
        index = None if new is None else table.index_of(new)
        if index is not None and table.cursor_row != index:
            table.move_cursor(row=index, animate=False, scroll=True)
        self._title_table()
        if new != before or (new is not None and self.person.get(new) is not self._detail_ask):
            self._select(new)  # another ask, or another ask under the same name: shown anew
            hidden = None if before is None or at is not None else self.person.get(before)
            if hidden is not None and new is not None:  # still pending: the filter hides it
                self.set_status(Content.assemble(
                    ("The ask you had selected is hidden by the filter (", WARN), (ask_label(hidden), ""),
                    ("): this is the one in its place; keys wait until you have seen it.", WARN)), about=new)
        elif new is not None and index is not None:
            # Same ask on screen: only its position and the counts change.
            self.detail.update_header(self.current_ask(), self.clock(), index + 1, len(keys))
            self._subtitle()
        else:
            self._render_detail()

    def _title_table(self) -> None:
        title = "Pending asks — oldest first"
        if self.ask_filter.active:
            shown, total = self.table.row_count, self._pending_total
            title = f"Pending asks — filter: {safe_plain(self.filter_input.value, 40)} ({shown} of {total})"
        self.table.border_title = title
        marked = len(self.marked)
        notes = [f"{marked} marked"] if marked else []
        if self.table.cut:
            notes.append("…+N: N more characters · enter shows all")
        self.table.border_subtitle = " · ".join(notes)

    def _subtitle(self) -> None:
        shown = self.table.row_count
        total = self._pending_total
        text = f"{total} pending" if total else "no pending asks"
        if self.ask_filter.active:
            text += f" · {shown} shown" if shown or not total else " · none match the filter"
        self.sub_title = text

    def _select(self, key: AskKey | None) -> None:
        self.selected = key
        if self._in_place_of is not None and self._in_place_of[0] != key:
            self._in_place_of = None
        about = self.status_line.about if self._composed else None
        if about is not None and about != key:
            self.set_status("")  # a note about another ask no longer applies
        self._render_detail()
        self.show_selected()

    def show_selected(self) -> None:
        """Tell the safety what is selected (again); its keys count once a frame showing it is painted.

        Not while a step covers the queue: the step's own paint and grace stand (the queue tells the
        safety again when it comes back, `on_screen_resume`)."""
        if self._composed and self.app.screen is not self and self.safety.modal_open:
            self._render_legend()
            return
        ask = self.current_ask()
        self.safety.show(None if ask is None else ask.key,
                         hidden=ask is not None and (ask_has_hidden(ask) or self.judge_would_deny(ask)))
        if ask is not None and self._composed:
            self.detail.expect_paint(ask.key, self._painted)
        self._render_legend()
        # The footer rebuilds itself on every bindings refresh: only when what the keys may do changed.
        enabled = (ask is not None, self.typing, ask is not None and ask.has_facts)  # `R` needs facts
        if enabled != self._bindings_for:
            self._bindings_for = enabled
            self.refresh_bindings()

    def _painted(self, token: Hashable) -> None:
        self.safety.painted(token)
        self._legend_when_ready()

    def _tick(self) -> None:
        """Once a second: the visible ages and countdowns, an expired first press (it says so), a note
        past its time. Nothing else: the rows change with the person's events (`handle_events`), so
        thousands of pending asks cost nothing here."""
        now = self.clock()
        self.table.refresh_times(now)
        ask = self.current_ask()
        index = None if ask is None else self.table.index_of(ask.key)
        if ask is not None and index is not None:
            self.detail.update_header(ask, now, index + 1, self.table.row_count)
        if self.safety.expire():
            self.set_status(Content.styled("First press expired; press again to arm.", DIM),
                            about=ask.key if ask is not None else None, ttl=STATUS_TTL_S)
            self._render_legend()
        self.status_line.expire()

    def _render_detail(self) -> None:
        ask = self.current_ask()
        index = None if ask is None else self.table.index_of(ask.key)
        self._detail_ask = ask
        rows = self.table.row_count
        self.detail.show(ask, self.clock(), 0 if index is None else index + 1, rows,
                         hidden=0 if rows else self._pending_total)
        if ask is not None:
            # After the frame that shows it: truer "shown" time, and the write is off the key-to-paint path.
            self.call_after_refresh(self.post_message, self.AskShown(ask.key))
        self._render_legend()
        self._subtitle()

    # -- moving and filtering (none of it decides) ---------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Timing is judged per key by `self.safety` (it knows when the key was read).
        if action in DECIDING:
            return not (self._busy or self.current_ask() is None or self.typing)
        return True

    def action_cursor(self, delta: int) -> None:
        keys = self.table.ask_keys
        if not keys:
            return
        at = None if self.selected is None else self.table.index_of(self.selected)
        index = at or 0
        self._move_to(max(0, min(len(keys) - 1, index + delta)))

    def action_jump(self, where: int) -> None:
        keys = self.table.ask_keys
        if keys:
            self._move_to(where if where >= 0 else len(keys) - 1)

    def _move_to(self, target: int) -> None:
        keys = self.table.ask_keys
        if keys[target] != self.selected:
            self.table.move_cursor(row=target, animate=False, scroll=True)
            self._select(keys[target])
        else:
            self.action_disarm()

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # Only a mouse click moves the cursor without us; programmatic moves already set `selected`.
        key = self.table.key_at_cursor()
        if key is not None and key != self.selected:
            self._select(key)

    @on(AsksTable.Cut)
    def _cut_shown(self, event: AsksTable.Cut) -> None:
        event.stop()
        self._title_table()  # a row painted with a cell cut to fit: the subtitle says what …+N means

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # a click on a highlighted row decides nothing

    def action_disarm(self) -> None:
        if self.typing or (self.safety.armed is None and self.ask_filter.active):
            self._clear_filter()
        elif self.safety.disarm():
            self.set_status(Content.styled("Disarmed: nothing was decided.", DIM), about=self.selected)
            self._render_legend()

    def action_filter(self) -> None:
        self.safety.disarm()
        self._show_filter(True)
        # Focused now, not after the keys already queued behind `/`: typed fast, the filter's text
        # (`/zzz-none`: n, o, n) would otherwise reach the decision keys and deny the ask.
        self.set_focus(self.filter_input)
        self._render_legend()

    @on(Input.Changed, "#queue-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.ask_filter = AskFilter.parse(event.value)
        self.refresh_queue()

    @on(Input.Submitted, "#queue-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.set_focus(None)
        if not self.ask_filter.active:
            self._show_filter(False)
        self.show_selected()  # the keys come back to the queue: what is on screen is new to them

    def _clear_filter(self) -> None:
        self.filter_input.value = ""
        self._show_filter(False)
        self.set_focus(None)
        self.ask_filter = AskFilter()
        self.refresh_queue()
        self.show_selected()

    # -- deciding the selected ask: the key safety first, then one call of the person's API ----------

    def action_expand(self) -> None:
        ask = self.current_ask()
        if ask is not None:
            self.push_modal(ExpandScreen(ask))

    def action_scroll_detail(self, lines: int) -> None:
        self.detail.scroll_relative(y=lines, animate=False)

    def push_modal(self, screen: Screen[R], callback: ScreenResultCallbackType[R] | None = None) -> None:
        """A step over the ask: its keys are inert from now until it closes and the ask is painted again.
        The toasts shown go (they would cover the step's content and keys; the status line and the
        run's history keep what they said), and while the step is open notices go to the status line."""
        self.app.clear_notifications()
        self.safety.open_modal(screen)
        self.app.push_screen(screen, callback)

    def judge_would_deny(self, ask: Ask) -> bool:
        """The model judge recommended deny: deciding it takes a second press, and never in a batch."""
        review = self.advice(ask) if self.advice is not None else None
        return review is not None and review.recommendation == "deny"

    def _allowed(self, action: str) -> bool:
        """Ask the safety about this key press; say why when it does not commit."""
        verdict: Verdict = self.safety.press(action, self.key_time())
        if verdict.outcome == "commit":
            return True
        if verdict.outcome == "arm":
            current = self.current_ask()
            judged = current is not None and not ask_has_hidden(current)
            note = "" if not verdict.hidden else " (the model judge would deny this ask)" if judged \
                else " (this ask contains hidden characters)"
            expired = "The earlier first press expired. " if verdict.reason == "expired" else ""
            sentence = f"{expired}Press {self.key_for(action)} again to {VERBS.get(action, action)}."
            self.set_status(Content.assemble((sentence, "bold $text-warning"), (note, WARN)),
                            about=self.selected)
        elif verdict.reason in ("not-painted", "in-grace", "back-in-grace"):
            self.set_status(self._ignored_note(verdict.why), about=self.selected)
        self._render_legend()
        return False

    def _ignored_note(self, why: str) -> Content:
        """Why a key did nothing; when the ask it was likely meant for went while it was selected
        (decided elsewhere, or withdrawn by its child), that first: the person must not think the key
        decided it, nor that it went silently."""
        gone = self._in_place_of
        if gone is None or gone[0] != self.selected:
            return Content.styled(why, WARN)
        event = gone[1]
        what = (f"not answered by this node: {safe_plain(event.reason, 80)}" if event.reason is not None
                else "withdrawn by the child")
        return Content.assemble(("⚠ Nothing decided. The ask you were looking at went (", WARN),
                                (ask_label(event.ask), ""), (f" — {what}). ", WARN),
                                ("This is another ask: keys wait until you have seen it.", "bold"))

    async def _commit(self, call: Callable[[AskKey], Awaitable[object]], key: AskKey) -> bool:
        """Decide one ask; False (and said so) when it could not be decided."""
        self._busy = True
        try:
            await call(key)
            return True
        except (DecisionRefused, GrantRefused) as exc:
            why = safe_plain(str(exc), 300)
            self.app.notify(why, title="Not decided", severity="error", markup=False)
            self.say_after_events(Content.assemble(("Not decided: ", "bold $text-error"), (why, "")))
            return False
        finally:
            self._busy = False
            self._render_legend()

    async def action_approve(self) -> None:
        ask = self.shown_ask()
        if ask is not None and self._allowed("approve"):
            await self._commit(lambda key: self.person.approve_once(key, shown=ask), ask.key)

    async def action_approve_session(self) -> None:
        await self._approve_session("approve_session", "proven")

    async def action_approve_session_both(self) -> None:
        await self._approve_session("approve_session_both", "family")

    async def _approve_session(self, action: str, width: GrantWidth) -> None:
        ask = self.shown_ask()
        if ask is None:
            return
        if ask.request.session_approval is None:
            self.set_status(Content.styled(
                "The child sent no session suggestion, so there is nothing to record: use once or deny.",
                WARN), about=ask.key)
            return
        if width == "family" and proven_direction(Person.serving_grants_of(ask)) is None:
            self.set_status(Content.styled(
                "Both directions applies only when every grant proves one direction (read or write).", WARN))
            return
        if self._allowed(action):
            async def approve(key: AskKey) -> object:
                return await self.person.approve_for_requester_session(key, width, shown=ask)

            await self._commit(approve, ask.key)

    async def action_deny(self) -> None:
        ask = self.shown_ask()
        if ask is not None and self._allowed("deny"):
            await self._commit(lambda key: self.person.deny(key, shown=ask), ask.key)

    def action_deny_reason(self) -> None:
        ask = self.shown_ask()
        if ask is None or not self._allowed("deny_reason"):
            return
        key = ask.key

        async def done(reason: str | None) -> None:
            if self.person.get(key) is None:
                return  # withdrawn meanwhile: the withdrawal note stays
            if reason is None:
                self.set_status(Content.styled("Back from the reason editor: nothing was decided.", DIM),
                                about=key)
                return

            async def deny_with_reason(k: AskKey) -> object:
                return await self.person.deny(k, reason, shown=ask)

            await self._commit(deny_with_reason, key)

        self.push_modal(ReasonScreen(ask), done)

    async def action_approve_serving(self) -> None:
        ask = self.shown_ask()
        if ask is None or not self._allowed("approve_serving"):
            return
        key = ask.key
        if not ask.has_facts:
            self.set_status(Content.styled(
                "No whole-session grant for an ask without facts; nothing was decided.", WARN))
            self.push_modal(GrantNoFactsScreen(ask, self.key_for("approve"),
                                                self.key_for("approve_session")))
            return
        try:
            refusal = await self.person.check_serving_grant(key)  # off the loop: serving goes on
            if self.person.get(key) is not ask:
                raise DecisionRefused("this ask was withdrawn or replaced while its grant was checked: "
                                      "nothing was decided")
            grants = self.person.serving_grants(key)
            reach = self.person.grant_reach(key)
        except DecisionRefused as exc:
            self.app.notify(safe_plain(str(exc), 300), title="Not decided", severity="error", markup=False)
            return
        if refusal is not None:
            self.set_status(Content.assemble(("Whole-session grant refused: ", "bold $text-error"),
                                             (safe_plain(refusal, 300), "")), about=key)
            self.push_modal(GrantRefusedScreen(ask, refusal))
            return

        async def done(confirmed: bool | None) -> None:
            if self.person.get(key) is None:
                return  # withdrawn meanwhile: the withdrawal note stays
            if not confirmed:
                self.set_status(Content.styled("Whole-session grant cancelled: nothing was decided.", DIM),
                                about=key)
                return
            granted: list[AskDecided] = []

            async def grant(key: AskKey) -> None:
                granted.append(await self.person.approve_for_serving_session(key, shown=ask, reach=reach))

            await self._commit(grant, key)
            also = granted[0].also if granted else ()
            if also:
                self.say_after_events(Content.assemble(
                    ("Recorded the whole-session grant: ", "bold"), (ask_label(ask), ""),
                    (f" — and it decided {len(also)} other pending ask{'s' if len(also) != 1 else ''}.",
                     "bold")))

        self.push_modal(GrantConfirmScreen(ask, grants, reach, self.safety, self.key_time), done)

    async def decide_by_written_rule(self, reach: Sequence[Ask]) -> None:
        """After `R`'s rule was written: decide the asks its dialog listed that the rules now allow."""
        decided: list[AskDecided] = []

        async def decide(_: AskKey) -> None:
            decided.extend(await self.person.approve_by_written_rule(reach))

        await self._commit(decide, reach[0].key)
        self.say_after_events(Content.assemble(
            ("Rule written: ", "bold"),
            (f"it decided {len(decided)} pending ask{'s' if len(decided) != 1 else ''}", "bold"),
            (f" ({len(reach) - len(decided)} listed no longer pending or no longer allowed: still yours)"
             if len(decided) != len(reach) else "", DIM)))

    # -- batches: marked asks, previewed in full, each decided through the same call -----------------

    def action_mark(self) -> None:
        ask = self.current_ask()
        if ask is None:
            return
        if ask.key in self.marked:
            del self.marked[ask.key]
        else:
            self.marked[ask.key] = None
        self.table.set_marked(set(self.marked))
        self._title_table()
        self.action_cursor(1)
        self._render_legend()

    def action_mark_all(self) -> None:
        shown = self.table.ask_keys
        if shown and all(k in self.marked for k in shown):
            for key in shown:
                self.marked.pop(key, None)
        else:
            self.marked.update(dict.fromkeys(shown))
        self.table.set_marked(set(self.marked))
        self._title_table()
        self._render_legend()

    def batch_split(self) -> tuple[list[Ask], list[tuple[Ask, str]]]:
        """The marked asks still pending, in queue order: those a batch may decide, and those it may not."""
        included: list[Ask] = []
        excluded: list[tuple[Ask, str]] = []
        for ask in self.person.ordered():
            if ask.key not in self.marked:
                continue
            why = batch_exclusion(ask) or (
                "the model judge would deny it" if self.judge_would_deny(ask) else None)
            if why is None:
                included.append(ask)
            else:
                excluded.append((ask, why))
        return included, excluded

    def action_batch(self, verb: str) -> None:
        included, excluded = self.batch_split()
        if not included and not excluded:
            self.set_status(Content.styled(
                f"Nothing is marked: mark asks with {self.key_for('mark')} "
                f"(or {self.key_for('mark_all')} for every ask shown), then press "
                f"{self.key_for(f'batch({verb!r})')} again.", WARN))
            return
        if not included:  # no batch runs: they are unmarked, not left to be carried by the next one
            self._unmark(excluded)
            self._look_alone(excluded, "No batch: every marked ask needs a look of its own (unmarked). ")
            return
        if not self._allowed("batch"):  # the preview is a step: one press, after the paint and grace
            return

        preview = BatchPreviewScreen(verb, included, excluded, self.safety, self.key_time,
                                     double_press=self.settings.double_press)

        async def done(confirmed: bool | None) -> None:
            if confirmed:
                await self._decide_batch(verb, list(preview.included), excluded, preview.reason)
            else:
                why = f" ({preview.changed})" if preview.changed else ""
                self.set_status(Content.assemble(("Batch cancelled: nothing was decided.", DIM), (why, WARN)))

        self.push_modal(preview, done)

    def batch_changes(self, shown: list[Ask]) -> str | None:
        """Why the asks a preview showed are no longer exactly what is pending, or None: one withdrawn,
        answered, or replaced by another ask under the same name."""
        for ask in shown:
            now = self.person.get(ask.key)
            if now is None:
                return f"{ask_label(ask)} was withdrawn by its child (or answered) since the preview"
            if now is not ask:
                return (f"{ask_label(ask)} was replaced by another ask under the same id "
                        f"({ask_label(now)}) since the preview")
        return None

    async def _decide_batch(self, verb: str, shown: list[Ask], excluded: list[tuple[Ask, str]],
                            reason: str | None) -> None:
        """The very asks the preview showed, each decided through the same call as a single decision
        (a denial with the batch's reason, as `r` would with the same text), told as a batch. If any
        of them changed since the preview was painted, none is decided."""
        changed = self.batch_changes(shown)
        if changed is not None:
            line = Content.assemble(("Batch cancelled: nothing was decided. ", "bold $text-error"),
                                    (safe_plain(changed, 300), ""))
            self.say_after_events(line, ttl=STATUS_TTL_S)
            return
        size = len(shown)
        decided = skipped = failed = 0
        for ask in shown:
            if self.person.get(ask.key) is not ask:
                skipped += 1  # answered or withdrawn while the batch ran: never decided twice
                continue

            async def call(key: AskKey, ask: Ask = ask) -> object:
                if verb == "approve":
                    return await self.person.approve_once(key, shown=ask, batch=size)
                return await self.person.deny(key, reason, shown=ask, batch=size)

            if await self._commit(call, ask.key):
                decided += 1
            else:
                failed += 1
        words = "Approved once" if verb == "approve" else "Denied"
        parts: list[tuple[str, str]] = [(f"{words}: {decided} ask{'s' if decided != 1 else ''}", "bold")]
        parts.append((" (a batch; each recorded on its own)", DIM))
        if skipped:
            parts.append((f"; {skipped} already gone (withdrawn or answered)", WARN))
        if failed:
            parts.append((f"; {failed} not decided", "bold $text-error"))
        self.say_after_events(Content.assemble(*parts), ttl=STATUS_TTL_S)
        if excluded:
            self._unmark(excluded)
            self.app.call_later(self._look_alone, excluded)

    def _unmark(self, excluded: list[tuple[Ask, str]]) -> None:
        """Left out of a batch, they are unmarked too: the person decides each alone, and a later batch
        starts from what is marked again, not from what this one could not take."""
        for ask, _ in excluded:
            self.marked.pop(ask.key, None)
        self.table.set_marked(set(self.marked))
        self._title_table()
        self._render_legend()

    def _look_alone(self, excluded: list[tuple[Ask, str]], lead: str = "") -> None:
        """Asks a batch may not decide: select the first, so the person looks at it alone."""
        ask, why = excluded[0]
        if ask.key in self.table.ask_keys and ask.key != self.selected:
            self.table.move_cursor(row=self.table.ask_keys.index(ask.key), animate=False, scroll=True)
            self._select(ask.key)
        others = f" (and {len(excluded) - 1} more)" if len(excluded) > 1 else ""
        self.set_status(Content.assemble((f"{lead}Decide this ask alone: ", WARN), (why, ""), (others, DIM)),
                        about=ask.key)
