"""The main screen: pending asks oldest first, the selected one in full, decision keys.

Guards against accidental approval (tui-guide §A): the queue never reorders under the cursor; for
`input_grace_ms` after the visible ask changes every decision key is inert (`check_action`); with
`double_press` (and always for an ask with hidden characters) y / s / n need a second press; `w`
and `r` open an explicit confirmation step; `esc` never decides. Decision bindings are hidden from
the clickable Footer and shown in a plain legend instead, so no mouse path decides an ask.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen
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
)
from tui.sanitize import safe_plain
from tui.screens.modals import ExpandScreen, GrantConfirmScreen, GrantRefusedScreen, ReasonScreen
from tui.settings import UiSettings
from tui.widgets.ask_detail import AskDetail
from tui.widgets.ask_view import DIM, WARN, ask_has_hidden, primary_surface, primary_value
from tui.widgets.asks_table import AsksTable

if TYPE_CHECKING:
    from textual.timer import Timer

DECISIONS = frozenset({"approve", "approve_session", "approve_serving", "deny", "deny_reason"})
DOUBLE_PRESS = frozenset({"approve", "approve_session", "deny"})
ARM_TIMEOUT_S = 5.0
VERBS = {
    "approve": "approve once",
    "approve_session": "approve for this subagent's session",
    "deny": "deny",
}
KIND_WORDS = {
    "approved": "Approved once",
    "approved_for_session": "Approved for the subagent's session",
    "approved_for_serving_session": "Approved for the whole serving session",
    "denied": "Denied",
    "denied_with_reason": "Denied with reason",
}


def ask_label(ask: Ask) -> str:
    """A short sanitised one-liner: agent, surface, value."""
    return (f"{safe_plain(ask.request.requester_agent_name, 24)} {safe_plain(primary_surface(ask), 20)} "
            f"{safe_plain(primary_value(ask), 60)}")


@dataclass(frozen=True)
class Armed:
    action: str
    key: AskKey
    at: float


class QueueScreen(Screen[None]):
    """Pending asks and the decision keys. Every binding has an id (see `App.set_keymap`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "approve", "Approve once", show=False, id="ask.approve",
                tooltip="Allow this one call (approved)"),
        Binding("s", "approve_session", "Approve for subagent session", show=False,
                id="ask.approve_session",
                tooltip="approved_for_session: the child records its own suggestion for its session"),
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

    def __init__(self, human: HumanAuthorizer, settings: UiSettings, clock: Callable[[], float]) -> None:
        super().__init__(id="queue")
        self.human = human
        self.settings = settings
        self.clock = clock
        self.selected: AskKey | None = None
        self.armed: Armed | None = None
        self._grace_until = 0.0
        self._grace_timer: Timer | None = None
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
        # Coming back from another screen: what is visible is new to the eye.
        if self.selected is not None:
            self._start_grace()

    # -- state ------------------------------------------------------------------------------------

    def current_ask(self) -> Ask | None:
        return None if self.selected is None else self.human.get(self.selected)

    @property
    def in_grace(self) -> bool:
        return time.monotonic() < self._grace_until

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
        self.armed = None
        self._render_detail()
        if key is not None:
            self._start_grace()
        else:
            self._render_legend()
            self.refresh_bindings()

    def _start_grace(self) -> None:
        ms = self.settings.input_grace_ms
        if ms <= 0:
            return
        self._grace_until = time.monotonic() + ms / 1000
        if self._grace_timer is not None:
            self._grace_timer.stop()
        self._grace_timer = self.set_timer(ms / 1000 + 0.01, self._grace_over)
        self.refresh_bindings()
        self._render_legend()

    def _grace_over(self) -> None:
        self._grace_timer = None
        self.refresh_bindings()
        self._render_legend()

    def _tick(self) -> None:
        now = self.clock()
        self.table.sync(self.human.pending(), now)
        keys = self.table.ask_keys
        ask = self.current_ask()
        if ask is not None and ask.key in keys:
            self.detail.update_header(ask, now, keys.index(ask.key) + 1, len(keys))
        if self.armed is not None and time.monotonic() - self.armed.at > ARM_TIMEOUT_S:
            self.armed = None
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
        grace = self.in_grace
        has_grants = ask is not None and bool(HumanAuthorizer.serving_grants_of(ask))
        parts: list[tuple[str, str]] = []
        entries = (("approve", "approve once", True), ("approve_session", "subagent session", has_grants),
                   ("approve_serving", "whole session…", has_grants), ("deny", "deny", True),
                   ("deny_reason", "deny with reason…", True))
        for action, words, possible in entries:
            usable = ask is not None and possible and not grace
            armed = self.armed is not None and self.armed.action == action
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
        return not (action in DECISIONS and (self._busy or self.current_ask() is None or self.in_grace))

    def action_cursor(self, delta: int) -> None:
        keys = self.table.ask_keys
        if not keys:
            return
        index = keys.index(self.selected) if self.selected in keys else 0
        target = max(0, min(len(keys) - 1, index + delta))
        if keys[target] != self.selected:
            self.table.move_cursor(row=target, animate=False, scroll=True)
            self._select(keys[target])
        elif self.armed is not None:
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
        if self.armed is not None:
            self.armed = None
            self.set_status(Content.styled("Disarmed: nothing was decided.", DIM))
            self._render_legend()

    def action_expand(self) -> None:
        ask = self.current_ask()
        if ask is not None:
            self.armed = None
            self.app.push_screen(ExpandScreen(ask))

    def action_scroll_detail(self, lines: int) -> None:
        self.detail.scroll_relative(y=lines, animate=False)

    def _second_press(self, action: str, ask: Ask) -> bool:
        """True when the press commits; otherwise arms and says so."""
        hidden = ask_has_hidden(ask)
        if not (self.settings.double_press or hidden):
            return True
        now = time.monotonic()
        armed = self.armed
        fresh = armed is not None and now - armed.at <= ARM_TIMEOUT_S
        if fresh and armed is not None and armed.action == action and armed.key == ask.key:
            self.armed = None
            return True
        self.armed = Armed(action, ask.key, now)
        key = self.key_for(action)
        note = " (this ask contains hidden characters)" if hidden and not self.settings.double_press else ""
        sentence = "approve" if action == "approve" else VERBS[action]
        sentence = f"Press {key} again to {sentence}."
        self.set_status(Content.assemble((sentence, "bold $text-warning"), (note, WARN)))
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
        if ask is not None and self._second_press("approve", ask):
            await self._commit(self.human.approve_once, ask.key)

    async def action_approve_session(self) -> None:
        ask = self.current_ask()
        if ask is None:
            return
        if ask.request.session_approval is None:
            self.set_status(Content.styled(
                "The child sent no session suggestion, so there is nothing to record: use once or deny.",
                WARN))
            return
        if self._second_press("approve_session", ask):
            await self._commit(self.human.approve_for_requester_session, ask.key)

    async def action_deny(self) -> None:
        ask = self.current_ask()
        if ask is not None and self._second_press("deny", ask):
            await self._commit(self.human.deny, ask.key)

    def action_deny_reason(self) -> None:
        ask = self.current_ask()
        if ask is None:
            return
        self.armed = None
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

        self.app.push_screen(ReasonScreen(ask), done)

    def action_approve_serving(self) -> None:
        ask = self.current_ask()
        if ask is None:
            return
        self.armed = None
        key = ask.key
        try:
            refusal = self.human.serving_grant_refusal(key)
            grants = self.human.serving_grants(key)
        except DecisionRefused as exc:
            self.app.notify(str(exc), title="Not decided", severity="error", markup=False)
            return
        if refusal is not None:
            self.set_status(Content.assemble(("Whole-session grant refused: ", "bold $text-error"),
                                             (safe_plain(refusal, 300), "")))
            self.app.push_screen(GrantRefusedScreen(ask, refusal))
            return

        async def done(confirmed: bool | None) -> None:
            if self.human.get(key) is None:
                return  # withdrawn meanwhile: the withdrawal note stays
            if not confirmed:
                self.set_status(Content.styled("Whole-session grant cancelled: nothing was decided.", DIM))
                return
            await self._commit(self.human.approve_for_serving_session, key)

        self.app.push_screen(GrantConfirmScreen(ask, grants, self.settings.input_grace_ms), done)
