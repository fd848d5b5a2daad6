"""A screen over one table of rows (grants, sessions): Back, and `j`/`k` through the rows."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable


def rows_keys(area: str, *own: BindingType) -> list[BindingType]:
    """Back, the screen's `own` keys, then next/previous row; ids `<area>.back`, `.down`, `.up`."""
    return [
        Binding("escape", "app.pop_screen", "Back", id=f"{area}.back"),
        *own,
        Binding("j,down", "cursor(1)", "Next", key_display="j/↓", id=f"{area}.down"),
        Binding("k,up", "cursor(-1)", "Prev", key_display="k/↑", id=f"{area}.up"),
    ]


class RowsScreen(Screen[None]):
    """Its table is the `DataTable` with id `TABLE`."""

    TABLE = ""

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one(f"#{self.TABLE}", DataTable)

    def action_cursor(self, delta: int) -> None:
        table = self.table
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + delta)), animate=False)
