"""The model judge against you: per surface, how often it agreed with your verdicts, what it would have
allowed that you denied (the dangerous miss) and denied that you allowed, how often it failed, and
how long it took; then its latest reviews. Read from its record and the history; decides nothing.

`o` overturns the selected review's verdict (a judge's allow, or its final deny under `serve`): the
rule that would have decided it the other way, through the same confirm step as `R` (the JSON, the
file, the diff; written only on `y`)."""

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

from core.history.overturn import overturn
from core.history.suggest import SuggestionRefused
from core.judging.judge_record import measure
from core.rules import PolicyStore
from tui.render.judge_advice import MEASURE_COLUMNS, answers_line, disagreement_lines, measure_rows
from tui.sanitize import safe_plain, sanitize
from tui.screens.review_steps import ConfirmRuleScreen
from tui.screens.rows_screen import RowsScreen, rows_keys

#: "Judge" is its verdict where it decided, else its recommendation in parentheses.
REVIEW_COLUMNS = ("At", "Surface", "Value", "Judge", "What became of it", "Answers")


class JudgeScreen(RowsScreen):
    """Every binding has an id; the help screen lists them."""

    TABLE = "judge-reviews"
    BINDINGS: ClassVar[list[BindingType]] = rows_keys(
        "judge", Binding("g", "reload", "Refresh", id="judge.refresh"),
        Binding("o", "overturn", "Overturn", id="judge.overturn",
                tooltip="Propose the rule that decides the selected review's ask the other way"))

    def __init__(self, record: Path, history: Path | None, rules: PolicyStore | None = None) -> None:
        super().__init__(id="judge-screen")
        self.record, self.history, self.rules = record, history, rules
        self.reviews: list[dict[str, Any]] = []

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
        self.reviews = reviews
        for review in reviews:
            self.table.add_row(
                Text(time.strftime("%H:%M:%S", time.localtime(review["at"]))),
                sanitize(review["surface"], single_line=True).text(),
                sanitize(review["value"] or "", single_line=True).text(),
                Text(review["verdict"] if review["routed"] == "decided" else f"({review['recommendation']})"),
                Text(review["routed"] if review["failure"] is None else f"failed: {review['failure']}"[:80]),
                Text(answers_line(_answers(review["answers"]))[:120]),
            )


    def action_overturn(self) -> None:
        row = self.table.cursor_row
        if self.rules is None or not 0 <= row < len(self.reviews):
            self.notify("No review selected, or this authorizer has no rules to add to.", markup=False)
            return
        review = self.reviews[row]
        if review["routed"] != "decided":
            self.notify("The judge decided nothing on this ask (you or the fail-safe did): nothing to "
                        "overturn.", markup=False)
            return
        try:
            offer = overturn(self.rules, review["verdict"], review["surface"], review["value"], time.time())
        except SuggestionRefused as exc:
            self.notify(safe_plain(str(exc), 300), title="No rule proposed", severity="warning", markup=False)
            return
        self.app.push_screen(ConfirmRuleScreen(offer, self.rules))


def _latest(record: Path, limit: int = 200) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{record}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT at, surface, value, recommendation, verdict, routed, failure, answers "
                            "FROM reviews ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [dict(row) for row in rows]
    finally:
        conn.close()


def _answers(text: object) -> dict[str, object] | None:
    if not isinstance(text, str):
        return None
    loaded = json.loads(text)
    return loaded if isinstance(loaded, dict) else None
