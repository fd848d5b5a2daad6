"""Review past asks: a filterable, virtualised list of the history, details, and rule suggestions.

Standalone: `ReviewScreen(store, rules)` needs only a `HistoryStore` (and, for suggestions, this
node's `PolicyStore`). Every string a child sent is shown through `tui.sanitize` as `Content` or
`Text`; nothing is ever parsed as markup. A suggested rule is written only from the confirm step,
which shows the exact JSON, the target file and the diff first.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from core.history import HistoryFilter, HistoryReader, HistoryStore, Summary
from core.history.suggest import (
    suggest,
)
from core.rules import PolicyStore
from tui.render.history import summary_content
from tui.screens.review_steps import DetailScreen, RuleReach, SuggestionsScreen
from tui.widgets.history_list import HistoryList, header_text

FILTER_DEBOUNCE_S = 0.15

class ReviewScreen(Screen[None]):
    """The whole history: type `agent:` `session:` `surface:` `verdict:` terms and free text."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Back", id="review.back"),
        Binding("slash", "focus_filter", "Filter", key_display="/", id="review.filter"),
        Binding("s", "suggestions", "Suggested rules", id="review.suggestions"),
    ]

    def __init__(self, store: HistoryStore, rules: PolicyStore | None = None,
                 reach: RuleReach | None = None) -> None:
        """`reach`: a suggested rule's dialog lists the pending asks it decides, then decides them."""
        super().__init__(id="review")
        self.store = store
        self.rules = rules
        self.reach = reach
        self.filter = HistoryFilter()
        self._reader: HistoryReader

    def compose(self) -> ComposeResult:
        yield Input(
            placeholder="filter: agent:NAME session:ID surface:S verdict:V  free text", id="review-filter"
        )
        yield Static(id="review-summary", markup=False)
        yield Static(header_text(), id="review-header", markup=False)
        yield HistoryList(self.store, id="review-list")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.sub_title = "history"
        self._reader = self.store.reader()
        self.apply_filter(HistoryFilter())
        self.history_list.focus()

    def on_resize(self) -> None:
        """The headers follow the list's columns, which give way to the value at a narrow width."""
        self.call_after_refresh(self._header)

    def _header(self) -> None:
        self.query_one("#review-header", Static).update(header_text(self.history_list.size.width or None))

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "review-summary")
        self._reader.close()

    @property
    def history_list(self) -> HistoryList:
        return self.query_one("#review-list", HistoryList)

    def apply_filter(self, where: HistoryFilter) -> None:
        """The list at once; the summary (a few scans of the matching rows) from a thread worker."""
        self.filter = where
        self.history_list.show(self.store.ids(where))
        self.query_one("#review-summary", Static).update(Content.styled("summarising…", "dim"))
        self._summarise(where)

    @work(thread=True, exclusive=True, group="review-summary")
    def _summarise(self, where: HistoryFilter) -> None:
        summary = self._reader.summary(where)
        # Sent whether or not the worker was cancelled meanwhile: the screen may close between any
        # check here and the call on the loop, so `_show_summary` is what copes with a closed screen.
        self.app.call_from_thread(self._show_summary, where, summary)

    def _show_summary(self, where: HistoryFilter, summary: Summary) -> None:
        """A summary that arrives after the screen closed has nowhere to go (`query`, not `query_one`)."""
        if where == self.filter:
            for box in self.query("#review-summary").results(Static):
                box.update(summary_content(summary))

    @on(Input.Changed, "#review-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        text = event.value
        self.set_timer(FILTER_DEBOUNCE_S, lambda: self._debounced(text))

    def _debounced(self, text: str) -> None:
        if self.query_one("#review-filter", Input).value == text:
            self.apply_filter(HistoryFilter.parse(text))

    @on(Input.Submitted, "#review-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.apply_filter(HistoryFilter.parse(event.value))
        self.history_list.focus()

    @on(HistoryList.Chosen)
    def _chosen(self, event: HistoryList.Chosen) -> None:
        self.app.push_screen(DetailScreen(event.row, self.rules))

    def action_focus_filter(self) -> None:
        self.query_one("#review-filter", Input).focus()

    def action_leave(self) -> None:
        if self.focused is self.query_one("#review-filter", Input):
            self.history_list.focus()
        else:
            self.dismiss()

    def action_suggestions(self) -> None:
        if self.rules is None:
            self.notify("Rule suggestions need this node's rules (none were given).", markup=False)
            return
        offers = suggest(self.store, self.rules)
        if not offers:
            self.notify("Nothing repeated often enough to suggest a rule.", markup=False)
            return
        self.app.push_screen(SuggestionsScreen(offers, self.rules, self.reach))
