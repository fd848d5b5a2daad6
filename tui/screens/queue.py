"""The main screen: pending asks oldest first, the selected one in full, decision keys.

Guards against accidental approval (tui-guide §A): the queue never reorders under the cursor; every
timing and press rule (grace after the ask is painted, double press, hidden characters, modal
grace, armed-press expiry) is `core.keysafety.KeySafety`, fed from here: the selection, the paint
of the ask's header (`PaintProbe`), and each key's read time. `w` and `r` open an explicit
confirmation step; `esc` never decides. Decision bindings are hidden from the clickable Footer and
shown in a plain legend instead, so no mouse path decides an ask.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, ClassVar, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen, ScreenResultCallbackType
from textual.widgets import DataTable, Footer, Header, Static

from core.asks import Ask, AskKey
from core.human import (
    AskAdded,
    AskDecided,
    AskWithdrawn,
    DecisionRefused,
    GrantRefused,
    HumanAuthorizer,
    HumanEvent,
    proven_direction,
)
from core.keysafety import Armed, KeySafety, Verdict
from core.wire import GrantWidth
from tui.sanitize import safe_plain
from tui.screens.modals import (
    ExpandScreen,
    GrantConfirmScreen,
    GrantNoFactsScreen,
    GrantRefusedScreen,
    ReasonScreen,
)
from tui.settings import UiSettings
from tui.widgets.ask_detail import AskDetail
from tui.widgets.ask_view import DIM, WARN, ask_has_hidden, primary_surface, primary_value
from tui.widgets.asks_table import AsksTable

if TYPE_CHECKING:
    from textual.timer import Timer

R = TypeVar("R")

DECISIONS = frozenset(
    {"approve", "approve_session", "approve_session_both", "approve_serving", "deny", "deny_reason"}
)
VERBS = {
    "approve": "approve",
    "approve_session": "approve for this subagent's session",
    "approve_session_both": "approve for this subagent's session in both directions",
    "deny": "deny",
}
KIND_WORDS = {
    "approved": "Approved once",
    "approved_for_session": "Approved for the subagent's session",
    "approved_for_serving_session": "Approved and recorded a whole-session grant",
    "approved_by_serving_grant": "Approved by the whole-session grant",
    "denied": "Denied",
    "denied_with_reason": "Denied with reason",
}


def ask_label(ask: Ask) -> str:
    """A short sanitised one-liner: agent, surface, value."""
    return (f"{safe_plain(ask.request.requester_agent_name, 24)} {safe_plain(primary_surface(ask), 20)} "
            f"{safe_plain(primary_value(ask), 60)}")


class QueueScreen(Screen[None]):
    """Pending asks and the decision keys. Every binding has an id (see `App.set_keymap`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "approve", "Approve once", show=False, id="ask.approve",
                tooltip="Allow this one call (approved)"),
        Binding("s", "approve_session", "Approve for subagent session", show=False,
                id="ask.approve_session",
                tooltip="approved_for_session: the child records its own suggestion for its session"),
        Binding("b", "approve_session_both", "Approve for subagent session, both directions", show=False,
                id="ask.approve_session_both",
                tooltip="approved_for_session at width family: read and write (only when the grant is "
                        "one direction)"),
        Binding("w", "approve_serving", "Approve for whole serving session", show=False,
                id="ask.approve_serving",
                tooltip="Record the suggestion as this node's session rule (asks for confirmation)"),
        Binding("n", "deny", "Deny", show=False, id="ask.deny", tooltip="Deny (denied)"),
        Binding("r", "deny_reason", "Deny with reason", show=False, id="ask.deny_reason",
                tooltip="Deny with a reason relayed to the agent (denied_with_reason)"),
        Binding("j,down", "cursor(1)", "Next", key_display="j/↓", id="queue.down"),
        Binding("k,up", "cursor(-1)", "Prev", key_display="k/↑", id="queue.up"),
        Binding("enter", "expand", "Expand", id="queue.expand", tooltip="Show every value in full"),
        Binding("pagedown", "scroll_detail(8)", "Scroll detail", show=False, id="queue.scroll_down"),
        Binding("pageup", "scroll_detail(-8)", "Scroll detail", show=False, id="queue.scroll_up"),
        Binding("escape", "disarm", "Disarm", show=False, id="queue.disarm",
                tooltip="Cancel an armed first press (never denies)"),
    ]

    def __init__(
        self,
        human: HumanAuthorizer,
        settings: UiSettings,
        clock: Callable[[], float],
        safety: KeySafety,
        key_time: Callable[[], float],
    ) -> None:
        """`clock` is wall time (ages); `safety` and `key_time` (the current key's read time) share
        the monotonic clock."""
        super().__init__(id="queue")
        self.human = human
        self.settings = settings
        self.clock = clock
        self.safety = safety
        self.key_time = key_time
        self.selected: AskKey | None = None
        self._ready_timer: Timer | None = None
        self._busy = False
        self._composed = False
        self.on_shown: Callable[[AskKey], None] | None = None
        self._refresh_pending = False

    # -- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with Vertical(id="queue-body"):
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

    def on_mount(self) -> None:
        self._composed = True
        self.query_one("#asks", AsksTable).border_title = "Pending asks — oldest first"
        self.set_interval(1.0, self._tick)
        self.refresh_queue()
        self._render_legend()

    def on_screen_resume(self) -> None:
        # Coming back from another screen or a modal: what is visible is new to the eye.
        self._show_selected()

    # -- state ------------------------------------------------------------------------------------

    def current_ask(self) -> Ask | None:
        return None if self.selected is None else self.human.get(self.selected)

    @property
    def armed(self) -> Armed | None:
        """The armed first press, if any."""
        return self.safety.armed

    def handle_event(self, event: HumanEvent) -> None:
        """Called synchronously for every `HumanAuthorizer` event."""
        if isinstance(event, AskWithdrawn):
            self.set_status(Content.assemble(
                ("⚠ Withdrawn by the child (it stopped waiting): ", WARN),
                (ask_label(event.ask), ""),
                (" — not answered, and not a denial.", DIM),
            ))
        elif isinstance(event, AskDecided):
            line = Content.assemble((KIND_WORDS.get(event.kind, event.kind) + ": ", "bold"),
                                    (ask_label(event.ask), ""))
            if event.response.denial_reason:
                line = Content.assemble(line, (" — reason: ", DIM),
                                        (safe_plain(event.response.denial_reason, 80), ""))
            self.set_status(line)
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
        """Sync rows with the pending asks; keep the cursor on the same ask whenever it still exists."""
        if not self._composed:
            return
        table = self.table
        before = self.selected
        before_index = None if before is None else table.index_of(before)
        asks = self.human.pending()
        table.sync(asks, self.clock())
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
        if new != before:
            self._select(new)
        elif new is not None:
            # Same ask on screen: only its position and the counts change.
            self.detail.update_header(self.current_ask(), self.clock(), keys.index(new) + 1, len(keys))
            self.sub_title = f"{len(keys)} pending"
        else:
            self._render_detail()

    def _select(self, key: AskKey | None) -> None:
        self.selected = key
        self._render_detail()
        self._show_selected()

    def _show_selected(self) -> None:
        """Tell the safety what is selected; its keys count once a frame showing it is painted."""
        ask = self.current_ask()
        self.safety.show(None if ask is None else ask.key, hidden=ask is not None and ask_has_hidden(ask))
        if ask is not None and self._composed:
            self.detail.expect_paint(ask.key, self._painted)
        self._render_legend()
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
        self.table.sync(self.human.pending(), now)
        keys = self.table.ask_keys
        ask = self.current_ask()
        if ask is not None and ask.key in keys:
            self.detail.update_header(ask, now, keys.index(ask.key) + 1, len(keys))
        if self.safety.expire():
            self.set_status(Content.styled("First press expired; press again to arm.", DIM))
            self._render_legend()

    def _render_detail(self) -> None:
        keys = self.table.ask_keys
        ask = self.current_ask()
        position = keys.index(ask.key) + 1 if ask is not None and ask.key in keys else 0
        self.detail.show(ask, self.clock(), position, len(keys))
        if ask is not None and self.on_shown is not None:
            self.on_shown(ask.key)
        self._render_legend()
        self.sub_title = f"{len(keys)} pending" if keys else "no pending asks"

    def set_status(self, content: Content | str) -> None:
        if self._composed:
            self.query_one("#status", Static).update(content)

    def key_for(self, action: str) -> str:
        """The key currently bound to `action` (after the user's keymap), for messages."""
        for active in self.active_bindings.values():
            if active.binding.action == action:
                return self.app.get_key_display(active.binding)
        for binding in self._bindings:
            if binding[1].action == action:
                return self.app.get_key_display(binding[1])
        return "?"

    def _render_legend(self) -> None:
        if not self._composed:
            return
        ask = self.current_ask()
        grace = ask is not None and not self.safety.accepting()
        grants = HumanAuthorizer.serving_grants_of(ask) if ask is not None else ()
        has_grants = bool(grants)
        parts: list[tuple[str, str]] = []
        entries = (("approve", "approve once", True), ("approve_session", "subagent session", has_grants),
                   ("approve_session_both", "both directions", proven_direction(grants) is not None),
                   ("approve_serving", "whole session…", has_grants and ask is not None and ask.has_facts),
                   ("deny", "deny", True), ("deny_reason", "deny with reason…", True))
        armed_press = self.safety.armed
        for action, words, possible in entries:
            if action == "approve_session_both" and not possible:
                continue  # offered only when it is a different width, as in pi
            usable = ask is not None and possible and not grace
            armed = armed_press is not None and armed_press.action == action
            key_style = (
                "reverse bold $text-warning" if armed else ("reverse bold" if usable else "reverse dim")
            )
            parts.append((f" {self.key_for(action)} ", key_style))
            parts.append((f" {words}  ", "" if usable else DIM))
        if ask is not None and grace:
            parts.append(("⏳ keys wait a moment (new ask shown)", WARN))
        elif ask is not None and (self.settings.double_press or ask_has_hidden(ask)):
            parts.append(("press twice to commit", DIM))
        self.query_one("#legend", Static).update(Content.assemble(*parts))

    # -- bindings ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Timing is judged per key by `self.safety` (it knows when the key was read).
        return not (action in DECISIONS and (self._busy or self.current_ask() is None))

    def action_cursor(self, delta: int) -> None:
        keys = self.table.ask_keys
        if not keys:
            return
        index = keys.index(self.selected) if self.selected in keys else 0
        target = max(0, min(len(keys) - 1, index + delta))
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

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # a click on a highlighted row decides nothing

    def action_disarm(self) -> None:
        if self.safety.disarm():
            self.set_status(Content.styled("Disarmed: nothing was decided.", DIM))
            self._render_legend()

    def action_expand(self) -> None:
        ask = self.current_ask()
        if ask is not None:
            self.push_modal(ExpandScreen(ask))

    def action_scroll_detail(self, lines: int) -> None:
        self.detail.scroll_relative(y=lines, animate=False)

    def push_modal(self, screen: Screen[R], callback: ScreenResultCallbackType[R] | None = None) -> None:
        """A step over the ask: its keys are inert from now until it closes and the ask is painted again."""
        self.safety.open_modal(screen)
        self.app.push_screen(screen, callback)

    def _allowed(self, action: str) -> bool:
        """Ask the safety about this key press; say why when it does not commit."""
        verdict: Verdict = self.safety.press(action, self.key_time())
        if verdict.outcome == "commit":
            return True
        if verdict.outcome == "arm":
            note = " (this ask contains hidden characters)" if verdict.hidden else ""
            expired = "The earlier first press expired. " if verdict.reason == "expired" else ""
            sentence = f"{expired}Press {self.key_for(action)} again to {VERBS.get(action, action)}."
            self.set_status(Content.assemble((sentence, "bold $text-warning"), (note, WARN)))
        elif verdict.reason in ("not-painted", "in-grace"):
            self.set_status(Content.styled(verdict.why, WARN))
        self._render_legend()
        return False

    async def _commit(self, call: Callable[[AskKey], Awaitable[object]], key: AskKey) -> None:
        self._busy = True
        try:
            await call(key)
        except (DecisionRefused, GrantRefused) as exc:
            self.app.notify(str(exc), title="Not decided", severity="error", markup=False)
            self.set_status(Content.assemble(("Not decided: ", "bold $text-error"), (str(exc), "")))
        finally:
            self._busy = False
            self.refresh_bindings()
            self._render_legend()

    async def action_approve(self) -> None:
        ask = self.current_ask()
        if ask is not None and self._allowed("approve"):
            await self._commit(self.human.approve_once, ask.key)

    async def action_approve_session(self) -> None:
        await self._approve_session("approve_session", "proven")

    async def action_approve_session_both(self) -> None:
        await self._approve_session("approve_session_both", "family")

    async def _approve_session(self, action: str, width: GrantWidth) -> None:
        ask = self.current_ask()
        if ask is None:
            return
        if ask.request.session_approval is None:
            self.set_status(Content.styled(
                "The child sent no session suggestion, so there is nothing to record: use once or deny.",
                WARN))
            return
        if width == "family" and proven_direction(HumanAuthorizer.serving_grants_of(ask)) is None:
            self.set_status(Content.styled(
                "Both directions applies only when every grant proves one direction (read or write).", WARN))
            return
        if self._allowed(action):
            async def approve(key: AskKey) -> object:
                return await self.human.approve_for_requester_session(key, width)

            await self._commit(approve, ask.key)

    async def action_deny(self) -> None:
        ask = self.current_ask()
        if ask is not None and self._allowed("deny"):
            await self._commit(self.human.deny, ask.key)

    def action_deny_reason(self) -> None:
        ask = self.current_ask()
        if ask is None or not self._allowed("deny_reason"):
            return
        key = ask.key

        async def done(reason: str | None) -> None:
            if self.human.get(key) is None:
                return  # withdrawn meanwhile: the withdrawal note stays
            if reason is None:
                self.set_status(Content.styled("Back from the reason editor: nothing was decided.", DIM))
                return

            async def deny_with_reason(k: AskKey) -> object:
                return await self.human.deny(k, reason)

            await self._commit(deny_with_reason, key)

        self.push_modal(ReasonScreen(ask), done)

    def action_approve_serving(self) -> None:
        ask = self.current_ask()
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
            refusal = self.human.serving_grant_refusal(key)
            grants = self.human.serving_grants(key)
            reach = self.human.grant_reach(key)
        except DecisionRefused as exc:
            self.app.notify(str(exc), title="Not decided", severity="error", markup=False)
            return
        if refusal is not None:
            self.set_status(Content.assemble(("Whole-session grant refused: ", "bold $text-error"),
                                             (safe_plain(refusal, 300), "")))
            self.push_modal(GrantRefusedScreen(ask, refusal))
            return

        async def done(confirmed: bool | None) -> None:
            if self.human.get(key) is None:
                return  # withdrawn meanwhile: the withdrawal note stays
            if not confirmed:
                self.set_status(Content.styled("Whole-session grant cancelled: nothing was decided.", DIM))
                return
            before = len(self.human.decided)
            await self._commit(self.human.approve_for_serving_session, key)
            also = [d for d in self.human.decided[before:] if d.granted_on == key]
            if also:
                self.set_status(Content.assemble(
                    ("Recorded the whole-session grant: ", "bold"), (ask_label(ask), ""),
                    (f" — and it decided {len(also)} other pending ask{'s' if len(also) != 1 else ''}.",
                     "bold")))

        self.push_modal(GrantConfirmScreen(ask, grants, reach, self.safety, self.key_time), done)
