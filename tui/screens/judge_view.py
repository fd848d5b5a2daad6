"""The model judge against you: per surface, how often it agreed with your verdicts, what it would have
allowed that you denied (the dangerous miss) and denied that you allowed, how often it failed, and
how long it took; then its latest reviews. Read from its record and the history; decides nothing."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Header, Static

from core.judging.judge_record import measure
from tui.render.judge_advice import MEASURE_COLUMNS, answers_line, disagreement_lines, measure_rows
from tui.sanitize import safe_plain, sanitize
from tui.screens.rows_screen import RowsScreen, rows_keys

REVIEW_COLUMNS = ("At", "Surface", "Value", "Judge", "What became of it", "Answers")


class JudgeScreen(RowsScreen):
    """Every binding has an id; the help screen lists them."""

    TABLE = "judge-reviews"
    BINDINGS: ClassVar[list[BindingType]] = rows_keys(
        "judge", Binding("g", "reload", "Refresh", id="judge.refresh"))

    def __init__(self, record: Path, history: Path | None) -> None:
        super().__init__(id="judge-screen")
        self.record, self.history = record, history

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="")
        with Vertical(id="judge-body"):
            yield DataTable[str](id="judge-measures", cursor_type="none", zebra_stripes=True)
            yield Static(id="judge-differed", markup=False)
            yield DataTable[Text](id="judge-reviews", cursor_type="row", zebra_stripes=True)
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.sub_title = "the model judge against you"
        self.query_one("#judge-measures", DataTable).add_columns(*MEASURE_COLUMNS)
        self.table.add_columns(*REVIEW_COLUMNS)
        self.action_reload()

    def action_reload(self) -> None:
        measures_table: DataTable[str] = self.query_one("#judge-measures", DataTable)
        measures_table.clear()
        differed = self.query_one("#judge-differed", Static)
        try:
            measures = measure(self.record, self.history)
            reviews = _latest(self.record)
        except sqlite3.Error as exc:
            differed.update(f"The judge's record cannot be read: {safe_plain(str(exc), 200)}")
            return
        for row in measure_rows(measures):
            measures_table.add_row(*row)
        lines = disagreement_lines(measures)
        differed.update("\n".join(lines) if lines else "No ask you decided differed from the judge.")
        self.table.clear()
        for review in reviews:
            self.table.add_row(
                Text(time.strftime("%H:%M:%S", time.localtime(review["at"]))),
                sanitize(review["surface"], single_line=True).text(),
                sanitize(review["value"] or "", single_line=True).text(),
                Text(review["recommendation"]),
                Text(review["routed"] if review["failure"] is None else f"failed: {review['failure']}"[:80]),
                Text(answers_line(_answers(review["answers"]))[:120]),
            )


def _latest(record: Path, limit: int = 200) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{record}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT at, surface, value, recommendation, routed, failure, answers "
                            "FROM reviews ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [dict(row) for row in rows]
    finally:
        conn.close()


def _answers(text: object) -> dict[str, object] | None:
    if not isinstance(text, str):
        return None
    loaded = json.loads(text)
    return loaded if isinstance(loaded, dict) else None
