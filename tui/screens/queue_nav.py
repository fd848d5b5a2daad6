"""Moving through the queue (cursor, jump, a click on a row) and the `/` filter; none of it decides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.content import Content
from textual.widgets import DataTable, Input

from tui.render.styles import DIM
from tui.screens.queue_view import GUARDED, QueueView
from tui.widgets.ask_filter import AskFilter

if TYPE_CHECKING:
    pass


class NavigableQueue(QueueView):
    """The queue's moves and filter."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Timing is judged per key by `self.safety` (it knows when the key was read).
        if action in GUARDED:
            return not (self._busy or self.current_ask() is None or self.typing)
        return True

    def action_cursor(self, delta: int) -> None:
        keys = self.table.ask_keys
        if not keys:
            return
        index = keys.index(self.selected) if self.selected in keys else 0
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

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # a click on a highlighted row decides nothing

    def action_disarm(self) -> None:
        if self.typing or (self.safety.armed is None and self.ask_filter.active):
            self._clear_filter()
        elif self.safety.disarm():
            self.set_status(Content.styled("Disarmed: nothing was decided.", DIM), about=self.selected)
            self._render_legend()

    # -- filter -----------------------------------------------------------------------------------

    def action_filter(self) -> None:
        self.safety.disarm()
        self._show_filter(True)
        self.filter_input.focus()
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
        self._show_selected()  # the keys come back to the queue: what is on screen is new to them

    def _clear_filter(self) -> None:
        self.filter_input.value = ""
        self._show_filter(False)
        self.set_focus(None)
        self.ask_filter = AskFilter()
        self.refresh_queue()
        self._show_selected()

