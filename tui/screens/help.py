"""Every binding of the app, with the keys currently bound (after the user's keymap): the keys of the
screen `?` was pressed on first, then the keys that work everywhere, then every other screen's.

Lines are wrapped here, to the terminal's width, so a wrapped description or note keeps its indent
(a widget's own wrapping would start the next line at the left edge)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.render.styles import DIM

SAFETY_NOTES = (
    "Decision keys count only once the ask is on screen (its frame painted), and then after a short "
    "input grace; a key typed before that is ignored, however late the app handles it.",
    "With double press on, y / s / b / n arm on the first press and commit on the second; an ask with "
    "hidden characters always needs the second press.",
    "An armed first press expires after 5 s (pi's never does): pi's dialog exists only while its own "
    "agent waits, but this queue stays open beside other panes all day, so a key typed into the wrong "
    "pane minutes later must not complete a decision. Moving, esc or another ask also disarm.",
    "b (both directions) is offered, as in pi, only when every grant proves one direction (read or "
    "write): the child records its suggestion for both.",
    "w shows the exact rule(s) it would record and how many other pending asks it would approve, "
    "and asks again; its y counts only after the confirmation is painted, plus the grace. On an ask "
    "without facts w explains why no grant can apply. r needs a reason.",
    "Batches: space marks an ask, * marks every ask shown; Y / N list every marked ask in full (agent, "
    "surface, values) and decide them only on y in that list, with the same grace window and double "
    "press. Each ask is answered and recorded on its own. An ask with hidden characters (or a value "
    "too long to list whole) is never in a batch: it is selected for you to decide alone.",
    "/ filters the queue (agent: session: surface: terms and free text); esc clears it. While the "
    "filter field has focus every key types into it and none decides.",
    "A value cut to fit ends with …+N: N more characters are hidden; enter shows the ask in full.",
    "ctrl+p lists every action by name; choosing a decision there only tells you its key.",
    "esc never denies: it disarms, or goes back. Clicking never decides an ask.",
    "A withdrawn ask (the child stopped waiting) leaves the queue; it was never denied.",
)


KEYS_WIDTH = 14


def _hanging(head: str, text: str, width: int, head_style: str, *, dim_text: bool = False) -> list[Content]:
    """`head` then `text` wrapped to `width`, every wrapped line indented under the text's start."""
    indent = " " * len(head)
    wrapped = textwrap.wrap(text, max(20, width - len(head))) or [""]
    style = DIM if dim_text else ""
    return [Content.assemble((head if i == 0 else indent, head_style if i == 0 else ""), (line, style))
            for i, line in enumerate(wrapped)]


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close", id="help.close"),
        # Over the scroll's own keys (its `end` animates, and took a second press to arrive).
        Binding("end,G", "scroll_to(1)", "Last line", show=False, priority=True, id="help.end"),
        Binding("home,g", "scroll_to(0)", "First line", show=False, priority=True, id="help.home"),
    ]

    def __init__(self, sections: Sequence[tuple[str, Sequence[tuple[str, Binding]]]]) -> None:
        super().__init__(classes="expand")
        self.sections = sections
        self._width = 0

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="expand-body"):
            yield Static(id="help-text", markup=False)

    def on_resize(self) -> None:
        # Wrapped here, to the width the text really has once laid out: wrapped again by the widget
        # (a guess too wide by the scrollbar) it would leave orphan words on lines of their own.
        self.call_after_refresh(self._fill)

    def _fill(self) -> None:
        text = self.query_one("#help-text", Static)
        width = text.content_region.width
        if width and width != self._width:
            self._width = width
            text.update(self._content(width))

    def action_scroll_to(self, end: int) -> None:
        body = self.query_one("#expand-body", VerticalScroll)
        if end:
            body.scroll_end(animate=False, immediate=True)
        else:
            body.scroll_home(animate=False, immediate=True)

    def _content(self, width: int) -> Content:
        lines: list[Content] = [Content.styled("Keys", "bold underline")]
        for title, bindings in self.sections:
            lines.append(Content(""))
            lines.append(Content.styled(title, "bold $text-primary"))
            for keys, binding in bindings:
                head = f"  {keys:<{KEYS_WIDTH}} "
                lines.extend(_hanging(head, binding.description, width, "bold"))
                if binding.tooltip:
                    lines.extend(_hanging(" " * len(head), binding.tooltip, width, DIM, dim_text=True))
        lines.append(Content(""))
        lines.append(Content.styled("Safety", "bold $text-primary"))
        for note in SAFETY_NOTES:
            lines.extend(_hanging("  • ", note, width, DIM))
        lines.append(Content(""))
        lines.append(Content.styled("esc / ? : close · home / end: first / last line", DIM))
        return Content("\n").join(lines)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
