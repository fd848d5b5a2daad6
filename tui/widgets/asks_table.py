"""The pending asks in `createdAt` order, diff-updated by row key (never cleared and re-added).

Columns are data (`tui/widgets/ask_columns.py`). Optional columns (the session column, shown when more
than one session is served) are switched with `show_columns`. A value cut to fit its column ends
with `…+N` (N characters hidden), never silently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual._types import SegmentLines
from textual.coordinate import Coordinate
from textual.events import Resize
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowKey

from core.vocabulary.asks import Ask, AskKey
from tui.render.ask_facts import age_seconds, duration
from tui.sanitize import fit
from tui.widgets.ask_columns import COLUMNS, VALUE_ROOM, Column, order_of, row_key_of

CELL_PADDING = 1  # DataTable's default padding on each side of a cell
MIN_VALUE_WIDTH = 12
NARROW = 110
MARK = "●"
SELECTED = "▶"
ELSEWHERE = Coordinate(-9, -9)  # not a row or column (the header row is -1)


class AsksTable(DataTable[Text]):
    """Text cells only: a `str` cell would be parsed as markup."""

    # The screen owns the keys (so every binding has an id); clicking a row only moves the cursor.
    can_focus = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, show_cursor=True)
        self._keys: dict[str, AskKey] = {}
        self._asks: dict[str, Ask] = {}
        self._order: list[str] = []  # row keys in display order
        self._times_shown: dict[str, tuple[str, str, str]] = {}
        self._marked: set[str] = set()
        self._optional_shown: frozenset[str] = frozenset()
        self._columns: tuple[Column, ...] = ()
        self._cut_widths: dict[str, int] = {}
        self._selected_rk: str | None = None
        self._cut_cells: dict[str, set[str]] = {}  # row key -> the columns cut to fit
        self._now = 0.0

    def on_mount(self) -> None:
        self._build_columns()

    # -- columns -----------------------------------------------------------------------------------

    def show_columns(self, optional: Sequence[str]) -> None:
        """Show exactly these optional columns; a change rebuilds the table (rare: e.g. an adoption)."""
        wanted = frozenset(optional)
        if wanted == self._optional_shown:
            return
        self._optional_shown = wanted
        asks = [self._asks[rk] for rk in self._order]
        self.clear(columns=True)
        self._keys.clear()
        self._asks.clear()
        self._order.clear()
        self._times_shown.clear()
        self._marked.clear()
        self._cut_cells.clear()
        self._selected_rk = None
        self._build_columns()
        self._append(asks, self._now)

    @property
    def column_keys(self) -> list[str]:
        return [c.key for c in self._columns]

    def _build_columns(self) -> None:
        self._columns = tuple(c for c in COLUMNS if not c.optional or c.key in self._optional_shown)
        self._cut_widths = self._widths()
        narrow = self._narrow
        for column in self._columns:
            label = Text(column.label_for(narrow))
            self.add_column(label, key=column.key, width=self._cut_widths[column.key])

    @property
    def _narrow(self) -> bool:
        return self.scrollable_content_region.width < NARROW

    def _widths(self) -> dict[str, int]:
        room = self.scrollable_content_region.width
        narrow = room < NARROW
        fixed = {c.key: max(len(c.label_for(narrow)), c.narrow if narrow and c.narrow else c.width)
                 for c in self._columns if c.width is not None}
        gutters = 2 * CELL_PADDING * len(self._columns) + self.styles.scrollbar_size_vertical
        rest = max(MIN_VALUE_WIDTH, room - sum(fixed.values()) - gutters)
        # A wide table gives what the value does not need to the columns that get cut (surface,
        # agent, hint), one cell at a time in turn, up to each one's `grow`.
        spare = rest - VALUE_ROOM
        growing = [c for c in self._columns if c.grow is not None and c.width is not None]
        while spare > 0 and growing:
            for column in list(growing):
                if spare <= 0:
                    break
                if fixed[column.key] >= (column.grow or 0):
                    growing.remove(column)
                    continue
                fixed[column.key] += 1
                spare -= 1
                rest -= 1
        return {c.key: fixed.get(c.key) or rest for c in self._columns}

    def on_resize(self, event: Resize) -> None:
        widths = self._widths()
        if widths == self._cut_widths:
            return
        self._cut_widths = widths
        narrow = self._narrow
        changed = [c for c in self._columns if self.columns[ColumnKey(c.key)].width != widths[c.key]]
        for column in self._columns:
            self.columns[ColumnKey(column.key)].label = Text(column.label_for(narrow))
        for column in changed:
            self.columns[ColumnKey(column.key)].width = widths[column.key]
        self._clear_caches()  # a label may have changed with the width (the header row is cached)
        for rk, ask in self._asks.items():
            for column in changed:
                if column.cell is not None:
                    self.update_cell(rk, column.key, self._cell(column, ask))
        self._require_update_dimensions = True  # textual 8.2: a changed column width is not noticed
        self.refresh()

    def _cell(self, column: Column, ask: Ask) -> Text:
        assert column.cell is not None
        whole = column.cell(ask)
        width = self._cut_widths.get(column.key, column.width or MIN_VALUE_WIDTH)
        cells = self._cut_cells.setdefault(row_key_of(ask.key), set())
        if whole.cell_len > width:
            cells.add(column.key)
        else:
            cells.discard(column.key)
        return column.fitted(ask, width) if column.fitted is not None else fit(whole, width)

    @property
    def cut(self) -> bool:
        """Some cell of a row shown ends with `…+N` (the table's subtitle then says what it means)."""
        return any(self._cut_cells.get(rk) for rk in self._keys)

    # -- rows --------------------------------------------------------------------------------------

    @property
    def ask_keys(self) -> list[AskKey]:
        """In display order."""
        return [self._keys[rk] for rk in self._order]

    def key_at_cursor(self) -> AskKey | None:
        if not self.row_count:
            return None
        row = self.ordered_rows[min(self.cursor_row, self.row_count - 1)]
        return self._keys.get(str(row.key.value))

    def index_of(self, key: AskKey) -> int | None:
        rk = row_key_of(key)
        if rk not in self._keys:
            return None
        return self.get_row_index(rk)

    def set_marked(self, keys: set[AskKey]) -> None:
        """Show a mark in the first column of exactly these rows."""
        wanted = {row_key_of(k) for k in keys} & set(self._keys)
        changed = wanted ^ self._marked
        self._marked = wanted
        for rk in changed:
            self._paint_mark(rk)

    def _paint_mark(self, rk: str) -> None:
        """The first column: ▶ on the selected row (more than its colour says which it is), ● marked."""
        selected = rk == self._selected_rk
        text = Text.assemble((SELECTED if selected else " ", "bold"), (MARK if rk in self._marked else " ",
                                                                       "bold $accent"))
        with contextlib.suppress(CellDoesNotExist):  # a row being added: painted once it is
            self.update_cell(rk, "mark", text)

    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        super().watch_cursor_coordinate(old, new)
        self._follow_cursor()

    def _follow_cursor(self) -> None:
        """The ▶ follows the cursor (also when rows above it come or go)."""
        key = self.key_at_cursor()
        rk = row_key_of(key) if key is not None else None
        if rk == self._selected_rk:
            return
        before, self._selected_rk = self._selected_rk, rk
        for row in (before, rk):
            if row is not None and row in self._keys:
                self._paint_mark(row)

    def sync(self, asks: list[Ask], now: float) -> None:
        """Remove gone rows, add new ones in `createdAt` order, refresh times of the visible rest."""
        wanted = {row_key_of(a.key): a for a in asks}
        for rk in [k for k in self._keys if k not in wanted]:
            self.remove_row(rk)
            del self._keys[rk]
            del self._asks[rk]
            self._times_shown.pop(rk, None)
            self._cut_cells.pop(rk, None)
            self._marked.discard(rk)
        if len(self._order) != len(self._keys):
            self._order = [rk for rk in self._order if rk in self._keys]
        self._now = now
        self._append([a for rk, a in wanted.items() if rk not in self._keys], now)
        self._refresh_times(now)
        self._follow_cursor()

    def _append(self, asks: list[Ask], now: float) -> None:
        if not asks:
            return
        asks = sorted(asks, key=order_of)
        last = order_of(self._asks[self._order[-1]]) if self._order else None
        for ask in asks:
            rk = row_key_of(ask.key)
            self._keys[rk] = ask.key
            self._asks[rk] = ask
            age, left = self._times(ask, now)
            given = {"mark": Text(SELECTED if rk == self._selected_rk else ""), "age": age, "left": left}
            self.add_row(*(given[c.key] if c.cell is None else self._cell(c, ask) for c in self._columns),
                         key=rk)
            self._times_shown[rk] = (age.plain, left.plain, str(left.style))
        self._order += [row_key_of(a.key) for a in asks]
        if last is not None and order_of(asks[0]) < last:
            # An ask created before the last one shown (e.g. from an adopted inbox) joins in its place.
            self._order.sort(key=lambda rk: order_of(self._asks[rk]))
            position = {rk: i for i, rk in enumerate(self._order)}
            rows = {id(self.get_row(rk)[0]): position[rk] for rk in self._order}
            self.sort(key=lambda cells: rows[id(cells[0])])

    def _refresh_times(self, now: float) -> None:
        top = int(self.scroll_offset.y)
        bottom = top + max(self.size.height, 1)
        for index in range(max(0, top - 1), min(len(self._order), bottom + 1)):
            rk = self._order[index]
            age, left = self._times(self._asks[rk], now)
            shown = (age.plain, left.plain, str(left.style))
            # Only touch cells whose text changed and that are on screen: with a thousand asks
            # pending, a per-second refresh of every row would stall key handling.
            if self._times_shown.get(rk) == shown:
                continue
            self.update_cell(rk, "age", age)
            self.update_cell(rk, "left", left)
            self._times_shown[rk] = shown

    @staticmethod
    def _times(ask: Ask, now: float) -> tuple[Text, Text]:
        left_s = ask.seconds_left(now)
        left_style = "bold red" if left_s < 60 else ("yellow" if left_s < 180 else "")
        return Text(duration(age_seconds(ask, now))), Text(duration(left_s), style=left_style)

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> tuple[SegmentLines, SegmentLines]:
        """Textual caches a rendered row under the cursor's position, so every `j` re-renders every
        visible row. For a row the cursor (or hover) is not on, its position does not change the
        row's look: pass one fixed "elsewhere" so those rows stay cached (textual 8.2's private hook)."""
        row = self._row_locations.get(row_key)
        if cursor_location.row != row:
            cursor_location = ELSEWHERE
        if hover_location.row != row:
            hover_location = ELSEWHERE
        return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)

    def row_key_for(self, key: AskKey) -> RowKey:
        return RowKey(row_key_of(key))
