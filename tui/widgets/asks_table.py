"""The pending asks, oldest first, diff-updated by row key (never cleared and re-added)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from core.asks import Ask, AskKey
from tui.sanitize import sanitize
from tui.widgets.ask_view import age_seconds, ask_risk, duration, primary_surface, primary_value, risk_label

COLUMNS = (
    ("age", "Age", 6),
    ("left", "Left", 7),
    ("agent", "Agent", 16),
    ("surface", "Surface", 14),
    ("risk", "Risk (hint)", 12),
    ("value", "Value", None),
)


def row_key_of(key: AskKey) -> str:
    return f"{key.session_id}\x00{key.name}"


class AsksTable(DataTable[Text]):
    """Text cells only: a `str` cell would be parsed as markup."""

    # The screen owns the keys (so every binding has an id); clicking a row only moves the cursor.
    can_focus = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, show_cursor=True)
        self._keys: dict[str, AskKey] = {}
        self._times_shown: dict[str, tuple[str, str, str]] = {}

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(Text(label), key=key, width=width)

    @property
    def ask_keys(self) -> list[AskKey]:
        """In display order (the order rows were added: arrival order)."""
        return [self._keys[row.key.value] for row in self.ordered_rows if row.key.value in self._keys]

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

    def sync(self, asks: list[Ask], now: float) -> None:
        """Remove gone rows, append new ones at the end, refresh times of the rest."""
        wanted = {row_key_of(a.key): a for a in asks}
        top = int(self.scroll_offset.y)
        bottom = top + max(self.size.height, 1)
        for rk in [k for k in self._keys if k not in wanted]:
            self.remove_row(rk)
            del self._keys[rk]
            self._times_shown.pop(rk, None)
        for rk, ask in wanted.items():
            age, left = self._times(ask, now)
            shown = (age.plain, left.plain, str(left.style))
            if rk in self._keys:
                # Only touch cells whose text changed and that are on screen: with a thousand asks
                # pending, a per-second refresh of every row would stall key handling.
                if self._times_shown.get(rk) == shown or not self._on_screen(rk, top, bottom):
                    continue
                self.update_cell(rk, "age", age)
                self.update_cell(rk, "left", left)
            else:
                self._keys[rk] = ask.key
                self.add_row(age, left, *self._static_cells(ask), key=rk)
            self._times_shown[rk] = shown

    def _on_screen(self, rk: str, top: int, bottom: int) -> bool:
        index = self.get_row_index(rk)
        return top - 1 <= index <= bottom

    def on_data_table_row_highlighted(self) -> None:
        """Rows scrolled into view may show ages from before: let the next sync refresh them."""
        self._times_shown.clear()

    @staticmethod
    def _times(ask: Ask, now: float) -> tuple[Text, Text]:
        left_s = ask.seconds_left(now)
        left_style = "bold red" if left_s < 60 else ("yellow" if left_s < 180 else "")
        return Text(duration(age_seconds(ask, now))), Text(duration(left_s), style=left_style)

    @staticmethod
    def _static_cells(ask: Ask) -> tuple[Text, Text, Text, Text]:
        agent = sanitize(ask.request.requester_agent_name, single_line=True).text()
        surface = sanitize(primary_surface(ask), single_line=True).text()
        risk = Text(risk_label(ask_risk(ask)), style="bold yellow", no_wrap=True, overflow="ellipsis")
        value_style = "" if ask.has_facts else "italic"
        value = sanitize(primary_value(ask), single_line=True).text(value_style)
        value.truncate(400, overflow="ellipsis")
        return agent, surface, risk, value

    def row_key_for(self, key: AskKey) -> RowKey:
        return RowKey(row_key_of(key))
