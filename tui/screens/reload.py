"""A held config change that widens permissions: its diff, and the person's accept or decline.

The core holds the change (`core.rules.reloads.PendingReload`); this screen only shows it and
calls back. Accepting takes a key press after the input-grace window; `esc` keeps the rules in
force (declining), as it never decides anything else either.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from core.clock import SYSTEM_CLOCK, Clock
from core.rules.reloads import PendingReload
from tui.render.styles import DIM, WARN
from tui.sanitize import sanitize
from tui.screens.ask_steps import keys_follow_scroll, unseen


class ReloadReviewScreen(ModalScreen[bool]):
    """Shows the diff of one held reload; dismisses True to apply it, False to keep the rules."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "accept", "Apply the change", id="reload.accept"),
        Binding("n", "decline", "Keep the rules in force", id="reload.decline"),
        Binding("escape", "decline", "Keep the rules in force", id="reload.back"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="reload.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="reload.up"),
        Binding("pagedown", "scroll(8)", "Page down", show=False, id="reload.page_down"),
        Binding("pageup", "scroll(-8)", "Page up", show=False, id="reload.page_up"),
        Binding("end", "scroll_end", "End", show=False, id="reload.end"),
    ]

    def __init__(self, pending: PendingReload, grace_ms: int, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(classes="confirm")
        self.pending = pending
        self.clock = clock
        self._armed_at = clock.monotonic() + grace_ms / 1000
        self._grace_ms = grace_ms

    def compose(self) -> ComposeResult:
        path = sanitize(self.pending.path, single_line=True).content("bold")
        with Vertical(id="dialog"):
            yield Static(id="reload-keys", markup=False)  # docked: painted at every size (issue 20)
            yield Static(Content.assemble(("A config file changed and WIDENS permissions: ", "bold"), path),
                         markup=False)
            yield Static(Content.assemble(
                (f"{self.pending.origin} layer. ", DIM),
                ("Children can write this file, so the change is not applied until you accept it. "
                 "Until then the rules in force stay as they were.", ""),
            ), markup=False)
            with VerticalScroll(id="reload-diff", classes="panel"):
                for line in self.pending.diff_lines():
                    style = WARN if line.endswith("(widens)") else ""
                    yield Static(sanitize(line, single_line=True).content(style), markup=False)

    def on_mount(self) -> None:
        self.query_one("#reload-diff", VerticalScroll).border_title = "What would change"
        self._render_keys()
        self.call_after_refresh(self._render_keys)
        keys_follow_scroll(self, self.query_one("#reload-diff", VerticalScroll), self._render_keys)
        if self._grace_ms > 0:
            self.set_timer(self._grace_ms / 1000 + 0.01, self._grace_over)

    def _grace_over(self) -> None:
        self._render_keys()
        self.refresh_bindings()

    def _render_keys(self, note: str = "") -> None:
        waiting = self.clock.monotonic() < self._armed_at
        if not note and unseen(self.query_one("#reload-diff", VerticalScroll)):
            note = "more below: scroll (j / pgdn / end) to see the whole diff before a"
        self.query_one("#reload-keys", Static).update(Content.assemble(
            ((note + "\n") if note else "", WARN),
            (" a ", "reverse bold" if not waiting else "reverse $text-muted"),
            (" apply the change   ", "" if not waiting else DIM),
            (" n / esc ", "reverse bold"),
            (" keep the rules in force", ""),
        ))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "accept" and self.clock.monotonic() < self._armed_at)

    def action_accept(self) -> None:
        if unseen(self.query_one("#reload-diff", VerticalScroll)):
            self._render_keys("Not all of the diff has been on screen: scroll (j / pgdn / end) to its end, "
                              "then a.")
            return
        self.dismiss(True)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#reload-diff", VerticalScroll).scroll_relative(y=lines, animate=False)
        self.call_after_refresh(self._render_keys)

    def action_scroll_end(self) -> None:
        self.query_one("#reload-diff", VerticalScroll).scroll_end(animate=False, immediate=True)
        self.call_after_refresh(self._render_keys)

    def action_decline(self) -> None:
        self.dismiss(False)
