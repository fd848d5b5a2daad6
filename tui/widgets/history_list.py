"""The history as a virtualised list: Toolong's line API, so 100,000 rows cost what a screenful costs.

The widget holds only the matching row ids; rows are fetched a page at a time when a line in that
page is first drawn, and rendered lines are kept in an LRU cache. Every child string goes through
`tui.sanitize` into a Rich `Text` (never markup) before it becomes a `Strip`.
"""

from __future__ import annotations

import time
from typing import ClassVar

from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from core.history import HistoryRow, HistoryStore
from tui.sanitize import fit, sanitize

PAGE = 100
VERDICT_STYLE = {
    "approved": "bold green",
    "approved_for_session": "bold green",
    "denied": "bold red",
    "denied_with_reason": "bold red",
}
_COLUMNS = (
    ("time", "Time", 14),
    ("agent", "Agent", 14),
    ("surface", "Surface", 10),
    ("verdict", "Verdict", 20),
    ("by", "Decided by", 26),
)
GAP = "  "
#: The value keeps at least this many cells: the other columns give way first, in this order.
VALUE_ROOM = 20
_NARROWEST = {"by": 10, "agent": 8, "surface": 7, "time": 11, "verdict": 10}


def column_widths(width: int | None) -> dict[str, int]:
    """Each column's width in `width` cells (None: the widest): "Decided by", then the agent, the
    surface, the time (its seconds go, its date stays) and the verdict shrink so the value keeps
    `VALUE_ROOM` cells."""
    widths = {name: cell_width for name, _, cell_width in _COLUMNS}
    if width is None:
        return widths
    over = sum(widths.values()) + len(GAP) * len(widths) + VALUE_ROOM - width
    for name, narrowest in _NARROWEST.items():
        if over <= 0:
            break
        give = min(over, widths[name] - narrowest)
        widths[name] -= give
        over -= give
    return widths


def _stamp(at: float, cells: int) -> str:
    return time.strftime("%m-%d %H:%M:%S" if cells >= 14 else "%m-%d %H:%M", time.localtime(at))


def header_text(width: int | None = None) -> Text:
    """The column headers, aligned with `row_text` at the same `width`."""
    widths = column_widths(width)
    line = Text(no_wrap=True, overflow="crop", style="bold")
    for name, label, _ in _COLUMNS:
        line.append_text(fit(Text(label), widths[name]))
        line.append(" " * (widths[name] - min(len(label), widths[name])) + GAP)
    line.append("Value")
    return line


def row_text(row: HistoryRow, width: int | None = None) -> Text:
    """One history line: time, agent, surface, verdict (or outcome), decider, value; a cut says `…+N`."""
    widths = column_widths(width)
    line = Text(no_wrap=True, overflow="crop")
    cells = {
        "time": Text(_stamp(row.arrived_at, widths["time"]), "dim"),
        "agent": sanitize(row.agent or "?", single_line=True).text(),
        "surface": sanitize(row.surface or "?", single_line=True).text(),
        "verdict": Text(row.verdict or row.outcome, VERDICT_STYLE.get(row.verdict or "", "bold yellow")),
        "by": sanitize(row.decider or row.outcome, single_line=True).text("dim"),
    }
    for name, _, _ in _COLUMNS:
        cell = fit(cells[name], widths[name])
        cell.pad_right(widths[name] - cell.cell_len)
        line.append_text(cell)
        line.append(GAP)
    value = sanitize(row.value or "", single_line=True).text()
    if row.source != "served":
        value.append(f"  [{row.source}]", "dim italic")
    if width is not None:
        value = fit(value, max(8, width - line.cell_len))
    line.append_text(value)
    return line


class HistoryList(ScrollView, can_focus=True):
    """Matching rows, newest first; `Chosen` is posted when the person opens one."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"history-list--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "move(1)", "Down", show=False, id="review.down"),
        Binding("k,up", "move(-1)", "Up", show=False, id="review.up"),
        Binding("pagedown,space", "page(1)", "Page down", show=False, id="review.page_down"),
        Binding("pageup,b", "page(-1)", "Page up", show=False, id="review.page_up"),
        Binding("home,g", "jump(0)", "First", show=False, id="review.first"),
        Binding("end,G", "jump(-1)", "Last", show=False, id="review.last"),
        Binding("enter", "choose", "Details", id="review.details"),
    ]
    cursor: reactive[int] = reactive(0, always_update=True)

    class Chosen(Message):
        def __init__(self, row: HistoryRow) -> None:
            super().__init__()
            self.row = row

    def __init__(self, store: HistoryStore, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = store
        self.ids: list[int] = []
        self._pages: LRUCache[int, dict[int, HistoryRow]] = LRUCache(64)
        self._lines: LRUCache[tuple[int, int, bool], Strip] = LRUCache(1000)

    def show(self, ids: list[int]) -> None:
        """Replace the listed rows (after a filter change): nothing is fetched until drawn."""
        self.ids = ids
        self._pages.clear()
        self._lines.clear()
        self.virtual_size = Size(0, len(ids))
        self.cursor = 0
        self.scroll_to(y=0, animate=False)
        self.refresh()

    def row_at(self, index: int) -> HistoryRow | None:
        if not 0 <= index < len(self.ids):
            return None
        page = index // PAGE
        rows = self._pages.get(page)
        if rows is None:
            rows = {r.id: r for r in self.store.rows(self.ids[page * PAGE : (page + 1) * PAGE])}
            self._pages[page] = rows
        return rows.get(self.ids[index])

    @property
    def pages_loaded(self) -> int:
        return len(self._pages)

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_offset.y) + y
        width = self.size.width
        row = self.row_at(index)
        if row is None:
            return Strip.blank(width, self.rich_style)
        selected = index == self.cursor
        key = (row.id, width, selected)
        cached = self._lines.get(key)
        if cached is not None:
            return cached
        base = self.rich_style
        if selected:
            base += self.get_component_rich_style("history-list--cursor")
        segments = list(row_text(row, width).render(self.app.console))
        strip = Strip(Segment.apply_style(segments, base)).crop_extend(0, width, base)
        self._lines[key] = strip
        return strip

    def watch_cursor(self, old: int, new: int) -> None:
        self._lines.clear()
        self.refresh()

    def _move_to(self, index: int) -> None:
        if not self.ids:
            return
        self.cursor = max(0, min(len(self.ids) - 1, index))
        top = int(self.scroll_offset.y)
        height = max(1, self.size.height)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)

    def action_move(self, delta: int) -> None:
        self._move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor + direction * max(1, self.size.height - 1))

    def action_jump(self, where: int) -> None:
        self._move_to(where if where >= 0 else len(self.ids) - 1)

    def action_choose(self) -> None:
        row = self.row_at(self.cursor)
        if row is not None:
            self.post_message(self.Chosen(row))

    def on_click(self, event: events.Click) -> None:
        self._move_to(int(self.scroll_offset.y) + event.y)
