"""This run's decisions, newest first (as the durable history and `pi-authorizer history`): a plain list."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from tui.render.styles import DIM


@dataclass(frozen=True)
class HistoryEntry:
    at: float
    what: str  # approved / denied / withdrawn / rule / quarantined ...
    who: str  # "you", "rule", "chain", "child", ...
    label: str  # sanitised one-liner (agent surface value)
    detail: str = ""


WHAT_STYLE = {
    "approved": "bold $text-success",
    "approved_for_session": "bold $text-success",
    "approved_for_serving_session": "bold $text-success",
    "approved_by_serving_grant": "bold $text-success",
    "approved_by_written_rule": "bold $text-success",
    "denied": "bold $text-error",
    "denied_with_reason": "bold $text-error",
    "withdrawn": "bold $text-warning",
    "quarantined": "bold $text-warning",
    "unsafe folder": "bold $text-error",
}


def history_content(entries: Sequence[HistoryEntry]) -> Content:
    if not entries:
        return Content.styled("Nothing decided yet in this run.", DIM)
    lines = []
    for entry in reversed(entries):  # newest first
        stamp = time.strftime("%H:%M:%S", time.localtime(entry.at))
        parts: list[tuple[str, str]] = [
            (f"{stamp}  ", DIM),
            (f"{entry.what:<30}", WHAT_STYLE.get(entry.what, "bold")),
            (f"{entry.who:<7}", DIM),
            (entry.label, ""),
        ]
        if entry.detail:
            parts.append((f"  — {entry.detail}", DIM))
        lines.append(Content.assemble(*parts))
    return Content("\n").join(lines)


class HistoryScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,h", "app.pop_screen", "Back", id="history.back"),
        Binding("j,down", "scroll(1)", "Down", key_display="j/↓", id="history.down"),
        Binding("k,up", "scroll(-1)", "Up", key_display="k/↑", id="history.up"),
    ]

    def __init__(self, entries: list[HistoryEntry]) -> None:
        super().__init__(id="history")
        self.entries = entries

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with VerticalScroll(id="history-body"):
            yield Static(id="history-list", markup=False)
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.sub_title = "this run's decisions"
        self.refresh_list()
        self.set_interval(1.0, self.refresh_list)

    def refresh_list(self) -> None:
        self.query_one("#history-list", Static).update(history_content(self.entries))

    def action_scroll(self, lines: int) -> None:
        self.query_one("#history-body", VerticalScroll).scroll_relative(y=lines, animate=False)
