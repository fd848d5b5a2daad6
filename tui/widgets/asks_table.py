"""The pending asks in `createdAt` order: each ask's row built once, the rows shown an index over them.

Filtering, clearing the filter and a batch of arrivals swap the table's index of rows in one pass
(`sync`); no row is rebuilt, re-measured or removed one by one, so a keystroke stays quick with
thousands of asks pending. Only the visible rows' times are refreshed once a second.

Columns are data (`tui/widgets/ask_columns.py`). Optional columns (the session column, shown when more
than one session is served) are switched with `show_columns`. A value cut to fit its column ends
with `…+N` (N characters hidden), never silently.

Size: one widget, DataTable's lookups as views of the rows shown and its render caches kept exactly
(what a batch of arrivals, a `j` or a tick paints again); split, each half would reach into the other's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import chain
from operator import attrgetter, is_
from typing import TypeVar, cast, overload

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._segment_tools import line_crop
from textual._two_way_dict import TwoWayDict
from textual._types import SegmentLines
from textual.coordinate import Coordinate
from textual.events import Resize
from textual.message import Message
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, Row, RowKey

from core.vocabulary.asks import Ask, AskKey
from tui.render.ask_facts import age_seconds, duration
from tui.sanitize import fit
from tui.widgets.ask_columns import COLUMNS, VALUE_ROOM, Column, row_key_of
from tui.widgets.cell_line import cell_line

CELL_PADDING = 1  # DataTable's default padding on each side of a cell
MIN_VALUE_WIDTH = 12
NARROW = 110
MARK = "●"
SELECTED = "▶"
ELSEWHERE = Coordinate(-9, -9)  # not a row or column (the header row is -1)
_RK, _ROW, _ASK_KEY = attrgetter("rk"), attrgetter("row"), attrgetter("ask.key")
T = TypeVar("T")


def _offset(row: _Row) -> tuple[RowKey, int]:
    return (row.key, 0)


MARK_COLUMN, AGE_COLUMN, LEFT_COLUMN = ColumnKey("mark"), ColumnKey("age"), ColumnKey("left")


class _Row:
    """One pending ask's row. Its cells are built when the row is first painted or read (`cells`
    None until then), so thousands of asks arriving or shown by a filter build nothing unseen."""

    __slots__ = ("ask", "cells", "key", "rk", "row")

    def __init__(self, ask: Ask, rk: str) -> None:
        self.ask = ask
        self.rk = rk
        self.key = RowKey(rk)
        self.row = Row(self.key, 1)
        self.cells: dict[ColumnKey, Text] | None = None


def _value(key: object) -> str:
    """A row key's string (DataTable passes `RowKey`s; our own calls pass the string)."""
    return str(key.value) if isinstance(key, RowKey) else str(key)


class _Shown(Mapping[RowKey, Row]):
    """DataTable's `rows`, read through the table's rows shown: nothing is filled per change (a dict
    of thousands of `RowKey`s hashes each in Python)."""

    def __init__(self, table: AsksTable) -> None:
        self._table = table

    def __getitem__(self, key: RowKey) -> Row:
        return self._table._row_at(key).row

    def __len__(self) -> int:
        return len(self._table._shown)

    def __iter__(self) -> Iterator[RowKey]:
        return (row.key for row in self._table._shown)

    def clear(self) -> None:
        """Nothing to clear: the view reads the table's rows shown."""


class _Cells(Mapping[RowKey, dict[ColumnKey, Text]]):
    """DataTable's `_data`: each shown row's cells, built on first read."""

    def __init__(self, table: AsksTable) -> None:
        self._table = table

    def __getitem__(self, key: RowKey) -> dict[ColumnKey, Text]:
        return self._table._cells(self._table._row_at(key))

    def __len__(self) -> int:
        return len(self._table._shown)

    def __iter__(self) -> Iterator[RowKey]:
        return (row.key for row in self._table._shown)

    def clear(self) -> None:
        """Nothing to clear: the view reads the table's rows shown."""


class _Column(Sequence[T]):
    """One thing of each shown row (its `Row`, its y offset, its ask's key), read from the rows
    shown: DataTable's `ordered_rows` and `_y_offsets` and the screen's `ask_keys` cost nothing to
    make when thousands of rows are installed."""

    def __init__(self, table: AsksTable, of: Callable[[_Row], T]) -> None:
        self._table = table
        self._of = of

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        shown = self._table._shown
        return list(map(self._of, shown[index])) if isinstance(index, slice) else self._of(shown[index])

    def __len__(self) -> int:
        return len(self._table._shown)

    def __iter__(self) -> Iterator[T]:
        return map(self._of, self._table._shown)

    def clear(self) -> None:
        """Nothing to clear: the view reads the table's rows shown."""


class _AskKeys(_Column[AskKey]):
    """The asks' keys in display order; membership and position by the table's index."""

    def __contains__(self, key: object) -> bool:
        return isinstance(key, AskKey) and self._table.index_of(key) is not None

    def index(self, key: AskKey, start: int = 0, stop: int | None = None) -> int:
        at = self._table.index_of(key)
        if at is None or at < start or (stop is not None and at >= stop):
            raise ValueError(f"{key!r} is not shown")
        return at


class _Locations(TwoWayDict[RowKey, int]):
    """DataTable's `_row_locations` (row key <-> index), read through the table's position index."""

    def __init__(self, table: AsksTable) -> None:  # no dictionaries of its own
        self._table = table

    def get(self, key: RowKey) -> int | None:
        return self._table._position.get(_value(key))

    def get_key(self, value: int) -> RowKey | None:
        shown = self._table._shown
        return shown[value].key if 0 <= value < len(shown) else None

    def contains_value(self, value: int) -> bool:
        return 0 <= value < len(self._table._shown)

    def __contains__(self, item: RowKey) -> bool:
        return _value(item) in self._table._position

    def __len__(self) -> int:
        return len(self._table._shown)

    def __iter__(self) -> Iterator[RowKey]:
        return (row.key for row in self._table._shown)

    def __setitem__(self, key: RowKey, value: int) -> None:
        raise TypeError("rows are installed by AsksTable.sync, never added one by one")

    def __delitem__(self, key: RowKey) -> None:
        raise TypeError("rows are installed by AsksTable.sync, never removed one by one")


class AsksTable(DataTable[Text]):
    """Text cells only: a `str` cell would be parsed as markup."""

    # The screen owns the keys (so every binding has an id); clicking a row only moves the cursor.
    can_focus = False

    class Cut(Message):
        """A row shown was painted with a cell cut to fit (`cut` turned true): the subtitle says why."""

    def __init__(self, *, id: str | None = None) -> None:
        self._shown: list[_Row] = []  # the rows shown, in display order
        self._position: dict[str, int] = {}  # row key -> index in `_shown`
        self._ordered = _Column(self, _ROW)  # DataTable's own start reads these
        self._offsets = _Column(self, _offset)
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, show_cursor=True)
        # DataTable's three lookups, read through `_shown` and `_position` (never filled one by one).
        self.rows = cast("dict[RowKey, Row]", _Shown(self))
        self._data = cast("dict[RowKey, dict[ColumnKey, Text]]", _Cells(self))
        self._locations = _Locations(self)
        self._row_locations = self._locations
        self._by_id: dict[int, _Row] = {}  # every pending ask's row by the ask's identity (sync's lookup)
        self._by_rk: dict[str, _Row] = {}  # the same rows by row key (marks, cells)
        #: The very sequences of the last `sync` (the person's pending asks are one tuple until an
        #: ask comes or goes): the same ones again only refresh the times, nothing is walked.
        self._synced: tuple[Sequence[Ask], Sequence[Ask] | None] | None = None
        self._ask_keys = _AskKeys(self, _ASK_KEY)
        self._times_shown: dict[str, tuple[str, str, str]] = {}
        self._marked: set[str] = set()
        self._optional_shown: frozenset[str] = frozenset()
        self._columns: tuple[Column, ...] = ()
        self._cut_widths: dict[str, int] = {}
        self._selected_rk: str | None = None
        self._cut_cells: dict[str, set[str]] = {}  # row key -> the columns cut to fit (rows built with one)
        self._cut_known = False  # what `cut` last said (a row built later with a cut cell tells `Cut`)
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
        asks = [row.ask for row in self._shown]
        self._by_id.clear()
        self._by_rk.clear()
        self._synced = None
        self._shown, self._position = [], {}
        self.clear(columns=True)
        self._row_locations = self._locations
        self._times_shown.clear()
        self._marked.clear()
        self._cut_cells.clear()
        self._selected_rk = None
        self._build_columns()
        self.sync(asks, self._now)

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
        self._synced = None
        narrow = self._narrow
        changed = [c for c in self._columns if self.columns[ColumnKey(c.key)].width != widths[c.key]]
        for column in self._columns:
            self.columns[ColumnKey(column.key)].label = Text(column.label_for(narrow))
        for column in changed:
            self.columns[ColumnKey(column.key)].width = widths[column.key]
        self.refresh_rows_afresh()  # cells built again at the new widths when painted; labels too
        self._require_update_dimensions = True  # textual 8.2: a changed column width is not noticed
        self.refresh()

    def _cell(self, column: Column, ask: Ask) -> Text:
        assert column.cell is not None
        whole = column.cell(ask)
        width = self._cut_widths.get(column.key, column.width or MIN_VALUE_WIDTH)
        rk = row_key_of(ask.key)
        if whole.cell_len > width:
            self._cut_cells.setdefault(rk, set()).add(column.key)
        elif (cells := self._cut_cells.get(rk)) is not None:
            cells.discard(column.key)
            if not cells:
                del self._cut_cells[rk]
        return column.fitted(ask, width) if column.fitted is not None else fit(whole, width)

    @property
    def cut(self) -> bool:
        """Some cell of a row shown and painted ends with `…+N` (the table's subtitle then says what it
        means; a row painted later with one posts `Cut`)."""
        self._cut_known = any(rk in self._position for rk in self._cut_cells)  # rows built with a cut cell
        return self._cut_known

    # -- rows: every pending ask's row made once, the table's rows an index over them ---------------

    @property
    def ask_keys(self) -> Sequence[AskKey]:
        """In display order (a view of the rows shown: copy it to keep it)."""
        return self._ask_keys

    def key_at_cursor(self) -> AskKey | None:
        shown = self._shown
        if not shown:
            return None
        return shown[min(self.cursor_row, len(shown) - 1)].ask.key

    def index_of(self, key: AskKey) -> int | None:
        return self._position.get(row_key_of(key))

    def shown_ask(self, index: int) -> Ask:
        """The ask whose row is painted at `index` (the very object its cells were made from)."""
        return self._shown[index].ask

    def _row_at(self, key: object) -> _Row:
        index = self._position.get(_value(key))
        if index is None:
            raise KeyError(key)
        return self._shown[index]

    def set_marked(self, keys: set[AskKey]) -> None:
        """Show a mark in the first column of exactly these rows (a row hidden by the filter keeps its
        mark for when it is shown again)."""
        wanted = {row_key_of(k) for k in keys} & self._by_rk.keys()
        changed = wanted ^ self._marked
        self._marked = wanted
        for rk in changed:
            self._paint_mark(rk)

    def _mark_text(self, rk: str) -> Text:
        selected = rk == self._selected_rk
        if not selected and rk not in self._marked:
            return Text("")  # what a row built afresh has: the same segments, not only the same text
        return Text.assemble((SELECTED if selected else " ", "bold"), (MARK if rk in self._marked else " ",
                                                                       "bold $accent"))

    def _paint_mark(self, rk: str) -> None:
        """The first column: ▶ on the selected row (more than its colour says which it is), ● marked."""
        if rk in self._position:
            self._set_cell(rk, MARK_COLUMN, self._mark_text(rk))
        elif (row := self._by_rk.get(rk)) is not None and row.cells is not None:
            row.cells[MARK_COLUMN] = self._mark_text(rk)  # hidden by the filter: right when shown

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
            if row is not None:
                self._paint_mark(row)

    def sync(self, asks: Sequence[Ask], now: float, pending: Sequence[Ask] | None = None) -> None:
        """Show exactly `asks`, in their order (`createdAt` order: `Person.pending`'s, so an ask
        adopted from another inbox joins in its place), and refresh the times of the visible rows.

        A row is made once per ask (by identity: an ask replaced under its name is a new row) and
        kept while the ask is in `pending` (default: `asks`); its cells are built when first painted.
        A filter, its clearing or a batch of arrivals only swaps the index of rows shown."""
        self._now = now
        last = self._synced
        if last is not None and last[0] is asks and last[1] is pending and isinstance(asks, tuple):
            self._refresh_times(now)
            self._follow_cursor()
            return
        by_id = self._by_id
        rows = list(map(by_id.get, map(id, asks)))  # one C loop over thousands
        if None in rows:
            for i in [i for i, row in enumerate(rows) if row is None]:
                rows[i] = self._new_row(asks[i])
        if rows != self._shown:  # identity first: the same rows compare in C, element by element
            self._install(cast("list[_Row]", rows))
        kept = pending if pending is not None else asks
        if len(by_id) > len(kept):
            keep = {id(a) for a in kept}
            for gone in [row for i, row in by_id.items() if i not in keep]:
                del by_id[id(gone.ask)]
                if self._by_rk.get(gone.rk) is gone:
                    del self._by_rk[gone.rk]
                    self._times_shown.pop(gone.rk, None)
                    self._cut_cells.pop(gone.rk, None)
                    self._marked.discard(gone.rk)
        self._synced = (asks, pending)
        self._refresh_times(now)
        self._follow_cursor()

    def _new_row(self, ask: Ask) -> _Row:
        rk = row_key_of(ask.key)
        row = self._by_id[id(ask)] = self._by_rk[rk] = _Row(ask, rk)
        self._times_shown.pop(rk, None)  # another ask's under the same name, if any
        self._cut_cells.pop(rk, None)
        return row

    def _cells(self, row: _Row) -> dict[ColumnKey, Text]:
        """The row's cells, built on first read (when it is painted): the times of now, the marks."""
        cells = row.cells
        if cells is not None:
            return cells
        rk, ask = row.rk, row.ask
        age, left = self._times(ask, self._now)
        self._times_shown[rk] = (age.plain, left.plain, str(left.style))
        given = {"age": age, "left": left}
        mark = self._mark_text(rk)
        cells = row.cells = {ColumnKey(c.key): mark if c.key == "mark" else
                             given[c.key] if c.cell is None else self._cell(c, ask)
                             for c in self._columns}
        if not self._cut_known and rk in self._cut_cells and rk in self._position:
            self._cut_known = True
            self.post_message(self.Cut())
        return cells

    def _install(self, rows: list[_Row]) -> None:
        """Make `rows` the table's rows: a few lists and one dictionary of strings, no row added or
        removed one by one (DataTable's `remove_row` renumbers every row after it; `add_row` measures
        each cell) and no cell built (a row's cells are built when it is painted). When the visible
        rows stay where they were (arrivals below them, a burst), their renders are kept."""
        old, self._shown = self._shown, rows
        self._position = dict(zip(map(_RK, rows), range(len(rows)), strict=True))  # the one index made
        self._row_locations = self._locations  # DataTable's `clear` puts a dictionary of its own there
        if not self._keep_visible(old, rows):
            self._update_count += 1
            self._clear_caches()
        self._require_update_dimensions = True  # the scrollable height, on idle (no row measured)
        self.check_idle()
        self.cursor_coordinate = self.cursor_coordinate  # kept within the rows
        self.hover_coordinate = self.hover_coordinate
        self.refresh(layout=True)

    def _keep_visible(self, old: list[_Row], rows: list[_Row]) -> bool:
        """Keep the renders of the visible rows when each is the very row it was at the same index
        (rows came or went only below them), dropping every other row's: a burst's batches then
        repaint no visible row. What is kept is exactly what rendering afresh gives: a row's renders
        are keyed by its own `RowKey` object (an ask replaced under its name is another row, never
        kept), and carry its index (the zebra stripe, the mouse's row), which did not change."""
        top = int(self.scroll_offset.y)
        bottom = top + max(self.size.height, 1)
        window = rows[top:bottom]
        if not window or len(window) != len(old[top:bottom]) or not all(map(is_, window, old[top:bottom])):
            return False
        keys = {id(row.key) for row in window}
        keys.add(id(self._header_row_key))
        indexes = range(top, top + len(window))
        header = self.header_height if self.show_header else 0
        for cell in [k for k in self._cell_render_cache.keys() if id(k[0]) not in keys]:  # noqa: SIM118
            self._cell_render_cache.discard(cell)
        for line in [k for k in self._row_render_cache.keys() if id(k[0]) not in keys]:  # noqa: SIM118
            self._row_render_cache.discard(line)
        for row in [k for k in self._row_renderable_cache.keys()  # noqa: SIM118
                    if k[0] != self._update_count or (k[1] != -1 and k[1] not in indexes)]:
            self._row_renderable_cache.discard(row)
        for y in [k for k in self._line_cache.keys() if k[0] >= header and k[0] - header not in indexes]:  # noqa: SIM118
            self._line_cache.discard(y)
        self._offset_cache.clear()
        self._ordered_row_cache.clear()
        return True

    def _set_cell(self, rk: str, column: ColumnKey, value: Text) -> None:
        """`update_cell` for one row: DataTable's own drops every cached render of every row (a `j`
        would repaint all the visible rows for its two marks); this drops only this row's."""
        row = self._by_rk[rk]
        if row.cells is None:
            return  # never painted: built right when it is
        row.cells[column] = value
        key = row.key  # the very object the caches' keys hold: compared by identity
        index = self._position[rk]
        for cell in [k for k in self._cell_render_cache.keys()  # noqa: SIM118 (no __iter__)
                     if k[0] is key and k[1] == column]:  # the row's other cells stay rendered
            self._cell_render_cache.discard(cell)
        for rendered in [k for k in self._row_render_cache.keys() if k[0] is key]:  # noqa: SIM118
            self._row_render_cache.discard(rendered)
        for cached in [k for k in self._row_renderable_cache.keys() if k[1] == index]:  # noqa: SIM118
            self._row_renderable_cache.discard(cached)
        y = index + (self.header_height if self.show_header else 0)  # lines are cached by position
        for line in [k for k in self._line_cache.keys() if k[0] == y]:  # noqa: SIM118
            self._line_cache.discard(line)
        self.refresh_row(index)

    def refresh_rows_afresh(self) -> None:
        """Forget every built cell and cached render: what is painted next is made from the asks
        again (what the caches paint must always equal it)."""
        for row in self._by_id.values():
            row.cells = None
        self._times_shown.clear()
        self._cut_cells.clear()
        self._cut_known = False  # a row painted again with a cut cell says so again (`Cut`)
        self._update_count += 1
        self._clear_caches()
        self.refresh()

    @property
    def ordered_rows(self) -> list[Row]:
        """The rows shown, in order (a view: DataTable rebuilds a list on every cell update)."""
        return cast("list[Row]", self._ordered)

    @property
    def _y_offsets(self) -> list[tuple[RowKey, int]]:
        """Every row is one line (a view: DataTable rebuilds a list on every cell update)."""
        return cast("list[tuple[RowKey, int]]", self._offsets)

    def _refresh_times(self, now: float) -> None:
        top = int(self.scroll_offset.y)
        bottom = top + max(self.size.height, 1)
        shown = self._shown
        changed: list[_Row] = []
        for index in range(max(0, top - 1), min(len(shown), bottom + 1)):
            row = shown[index]
            cells = row.cells
            if cells is None:
                continue  # never painted: its times are made when it is
            age, left = self._times(row.ask, now)
            times = (age.plain, left.plain, str(left.style))
            # Only touch cells whose text changed and that are on screen: with a thousand asks
            # pending, a per-second refresh of every row would stall key handling.
            if self._times_shown.get(row.rk) == times:
                continue
            cells[AGE_COLUMN], cells[LEFT_COLUMN] = age, left
            self._times_shown[row.rk] = times
            changed.append(row)
        if changed:
            self._drop_times(changed)

    def _drop_times(self, changed: Sequence[_Row]) -> None:
        """Forget what was rendered of the changed rows' two time cells only (every other cell stays
        cached: an idle queue re-renders two cells a row a second, not whole rows), then a repaint
        of those two columns' visible cells."""
        keys = {id(row.key) for row in changed}
        indexes = {self._position[row.rk] for row in changed}
        times = (AGE_COLUMN, LEFT_COLUMN)
        for cell in [k for k in self._cell_render_cache.keys()  # noqa: SIM118 (no __iter__)
                     if id(k[0]) in keys and k[1] in times]:
            self._cell_render_cache.discard(cell)
        for line in [k for k in self._row_render_cache.keys() if id(k[0]) in keys]:  # noqa: SIM118
            self._row_render_cache.discard(line)
        for row in [k for k in self._row_renderable_cache.keys() if k[1] in indexes]:  # noqa: SIM118
            self._row_renderable_cache.discard(row)
        self._line_cache.clear()  # lines are cached by screen position: made again from the rows
        for column in times:  # only the two columns' cells are painted again
            index = self._column_locations.get(column)
            if index is None:
                self.refresh()
                return
            self.refresh_column(index)

    def refresh_times(self, now: float) -> None:
        """The visible rows' ages and countdowns (once a second: nothing else is recomputed)."""
        self._now = now
        self._refresh_times(now)

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

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> SegmentLines:
        """DataTable's, cached under the same key, with a cell of one line of text rendered without
        rich's layout (`cell_line`: the same segments); anything else goes DataTable's way."""
        if not 0 <= row_index < len(self._shown) or column_index < 0 or self.fixed_rows or self.fixed_columns:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key, column_key = self._shown[row_index].key, self._column_locations.get_key(column_index)
        if column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        key = (row_key, column_key, base_style, cursor, hover, self._show_hover_cursor, self._update_count,
               self._pseudo_class_state)
        lines = self._cell_render_cache.get(key)
        if lines is not None:
            return lines
        cell = self._get_row_renderables(row_index).cells[column_index]
        if isinstance(cell, Text):
            component, post = self._get_styles_to_render_cell(
                False, False, False, hover, cursor, self.show_cursor, self._show_hover_cursor,
                self.cursor_foreground_priority == "css", self.cursor_background_priority == "css")
            pre = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component
            line = cell_line(cell, width, self.cell_padding, self.app.console, pre, post)
            if line is not None:
                self._cell_render_cache[key] = [line]
                return [line]
        return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """DataTable's, with its line cache keyed as `_render_line_in_row` keys rows: a line the
        cursor (or hover) is not on does not change when the cursor moves, so a `j` that scrolls the
        table by one row renders only the rows it changed (textual 8.2's private hook)."""
        width = self.size.width
        try:
            row_key, y_offset_in_row = self._get_offsets(y)
        except LookupError:
            return Strip.blank(width, base_style)
        row = self._row_locations.get(row_key)
        cursor, hover = self.cursor_coordinate, self.hover_coordinate
        cache_key = (y, x1, x2, width, cursor if cursor.row == row else ELSEWHERE,
                     hover if hover.row == row else ELSEWHERE, base_style, self.cursor_type,
                     self._show_hover_cursor, self._update_count, self._pseudo_class_state)
        cached = self._line_cache.get(cache_key)
        if cached is not None:
            return cached
        fixed, scrollable = self._render_line_in_row(row_key, y_offset_in_row, base_style,
                                                     cursor_location=cursor, hover_location=hover)
        fixed_width = sum(c.get_render_width(self) for c in self.ordered_columns[:self.fixed_columns])
        fixed_line: list[Segment] = list(chain.from_iterable(fixed)) if fixed else []
        scrollable_line: list[Segment] = list(chain.from_iterable(scrollable))
        segments = fixed_line + line_crop(scrollable_line, x1 + fixed_width, x2, width)
        strip = Strip(segments).adjust_cell_length(width, base_style).simplify()
        self._line_cache[cache_key] = strip
        return strip

    def row_key_for(self, key: AskKey) -> RowKey:
        return RowKey(row_key_of(key))
