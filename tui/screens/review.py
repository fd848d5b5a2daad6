"""Review past asks: a filterable, virtualised list of the history, details, and rule suggestions.

Standalone: `ReviewScreen(store, rules)` needs only a `HistoryStore` (and, for suggestions, this
node's `PolicyStore`). Every string a child sent is shown through `tui.sanitize` as `Content` or
`Text`; nothing is ever parsed as markup. A suggested rule is written only from the confirm step,
which shows the exact JSON, the target file and the diff first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Hashable
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from core.history import HistoryFilter, HistoryReader, HistoryRow, HistoryStore, Summary
from core.history.suggest import (
    Change,
    Suggestion,
    SuggestionRefused,
    Target,
    apply,
    preview,
    suggest,
    targets,
)
from core.keysafety import KeySafety
from core.rules import PolicyStore
from tui.sanitize import sanitize
from tui.widgets.history_list import HistoryList, header_text
from tui.widgets.painted import PaintProbe

FILTER_DEBOUNCE_S = 0.15
_MODAL_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{ width: 90%; max-width: 120; height: auto; max-height: 90%;
    border: thick $accent; background: $surface; padding: 1 2; }}
{name} VerticalScroll {{ height: auto; max-height: 30; }}
"""


def safe(text: str | None, style: str = "") -> Content:
    return sanitize(text or "", single_line=True).content(style)


def summary_content(summary: Summary) -> Content:
    """Asks per agent, share approved, median time a person took, withdrawn before an answer."""
    parts: list[Content] = [Content.styled(f"{summary.total:,} asks", "bold")]
    agents = [Content.assemble(safe(name), f" {count:,}") for name, count in summary.per_agent[:4]]
    if len(summary.per_agent) > 4:
        agents.append(Content(f"+{len(summary.per_agent) - 4} more"))
    if agents:
        parts.append(Content(", ").join(agents))
    share = summary.share_approved
    parts.append(Content("no verdicts" if share is None else f"{share:.0%} approved"))
    median = summary.median_person_ms
    parts.append(
        Content("no person decisions" if median is None else f"median person decision {_wait(median)}")
    )
    parts.append(Content(f"{summary.withdrawn:,} withdrawn unanswered"))
    return Content(" · ").join(parts)


def detail_content(row: HistoryRow) -> Content:
    """Facts (as the child sent them) and provenance (who decided, when, what was written)."""
    lines: list[Content] = []

    def field(label: str, value: object, style: str = "") -> None:
        if value is None or value == "":
            return
        text = value if isinstance(value, str) else str(value)
        lines.append(Content.assemble((f"{label:<18}", "dim"), safe(text, style)))

    def block(label: str, text: str) -> None:
        lines.append(Content.styled(label, "bold"))
        lines.extend(sanitize(line).content() for line in text.splitlines())

    lines.append(Content.styled("The ask", "bold underline"))
    field("request", row.request_id or row.request_name)
    field("agent", row.agent, "bold")
    mismatch = row.agent_mismatch()
    if mismatch is not None:
        field("requester agent", row.requester_agent())
        lines.append(Content.styled(f"⚠ {mismatch}", "bold $text-warning"))
    field("surface", row.surface)
    field("value", row.value, "bold")
    field("message", row.message)
    field("from session", row.requester_session)
    field("served session", row.served_session)
    field("child created", _stamp(row.created_at / 1000 if row.created_at else None))
    facts = row.facts_json()
    if facts:
        block("facts (as sent)", json.dumps(facts, indent=2, ensure_ascii=False))
    lines.append(Content(""))
    lines.append(Content.styled("Provenance", "bold underline"))
    field("outcome", row.outcome, "bold")
    field("verdict", row.verdict, "bold")
    field("decided by", row.decider)
    field("reason", row.reason)
    field("responder", row.responder_session)
    field("arrived", _stamp(row.arrived_at))
    field("shown", _stamp(row.shown_at))
    field("decided", _stamp(row.decided_at))
    field("time to decide", _wait(row.decide_ms) if row.decide_ms is not None else None)
    field("response written", {None: None, 0: "no (one already existed)", 1: "yes"}.get(row.written))
    field("source", row.source)
    decided_by = row.decided_by_json()
    if decided_by is not None:
        block("decidedBy", json.dumps(decided_by, indent=2, ensure_ascii=False))
    if row.response is not None:
        block("response (as written)", row.response.decode("utf-8", "backslashreplace"))
    if row.raw is not None:
        block(f"request bytes ({len(row.raw):,})", row.raw.decode("utf-8", "backslashreplace"))
    return Content("\n").join(lines)


def change_content(change: Change, target: Target) -> Content:
    """The confirm step: the exact rule JSON, the file it goes to, and the diff of that file."""
    rule = json.dumps(change.suggestion.rule_json(), indent=2, ensure_ascii=False)
    lines: list[Content] = [
        Content.styled("Add this rule?", "bold"),
        *(sanitize(line).content() for line in rule.splitlines()),
        Content(""),
        Content.assemble(("to ", "dim"), (target.label, "bold"), ("  ", ""), safe(str(target.path))),
        Content(""),
    ]
    for line in change.diff.splitlines():
        style = "$text-success" if line.startswith("+") else "$text-error" if line.startswith("-") else "dim"
        lines.append(sanitize(line).content(style))
    return Content("\n").join(lines)


class ReviewScreen(Screen[None]):
    """The whole history: type `agent:` `session:` `surface:` `verdict:` terms and free text."""

    DEFAULT_CSS = """
    ReviewScreen #review-filter { dock: top; }
    ReviewScreen #review-summary { dock: top; height: 1; padding: 0 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Back", id="review.back"),
        Binding("slash", "focus_filter", "Filter", key_display="/", id="review.filter"),
        Binding("s", "suggestions", "Suggested rules", id="review.suggestions"),
    ]

    def __init__(self, store: HistoryStore, rules: PolicyStore | None = None) -> None:
        super().__init__(id="review")
        self.store = store
        self.rules = rules
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
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_summary, where, summary)

    def _show_summary(self, where: HistoryFilter, summary: Summary) -> None:
        if where == self.filter:
            self.query_one("#review-summary", Static).update(summary_content(summary))

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
        self.app.push_screen(DetailScreen(event.row))

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
        self.app.push_screen(SuggestionsScreen(offers, self.rules))


class DetailScreen(ModalScreen[None]):
    """One past ask, read-only."""

    DEFAULT_CSS = _MODAL_CSS.format(name="DetailScreen")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Back", id="review.detail.back"),
    ]

    def __init__(self, row: HistoryRow) -> None:
        super().__init__()
        self.row = row

    def compose(self) -> ComposeResult:
        with Vertical(), VerticalScroll():
            yield Static(detail_content(self.row), id="review-detail", markup=False)


class SuggestionsScreen(ModalScreen[None]):
    """Rules the person's repeated approvals suggest; choosing one opens its confirm step."""

    DEFAULT_CSS = _MODAL_CSS.format(name="SuggestionsScreen")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Back", id="review.suggestions.back"),
    ]

    def __init__(self, offers: list[Suggestion], rules: PolicyStore) -> None:
        super().__init__()
        self.offers = offers
        self.rules = rules

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Content.styled("Suggested rules (enter to review one)", "bold"), markup=False)
            yield OptionList(
                *(Option(self._prompt(o), id=str(i)) for i, o in enumerate(self.offers)),
                id="review-offers",
            )

    @staticmethod
    def _prompt(offer: Suggestion) -> Content:
        return Content.assemble(
            ("allow ", "bold $text-success"),
            safe(offer.surface, "bold"),
            " ",
            safe(offer.pattern, "bold"),
            (f"  approved {offer.approvals}× by you, e.g. ", "dim"),
            safe(offer.examples[0] if offer.examples else ""),
        )

    @on(OptionList.OptionSelected, "#review-offers")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        offer = self.offers[int(event.option.id or 0)]
        self.app.push_screen(ConfirmRuleScreen(offer, self.rules))


class ConfirmRuleScreen(ModalScreen[bool]):
    """The only place a suggested rule is written: `y` after reading the JSON, file and diff."""

    DEFAULT_CSS = _MODAL_CSS.format(name="ConfirmRuleScreen")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Write the rule", id="review.rule.confirm"),
        Binding("t", "next_target", "Other file", id="review.rule.target"),
        Binding("n,escape", "cancel", "Cancel", id="review.rule.cancel"),
    ]

    def __init__(
        self,
        offer: Suggestion,
        rules: PolicyStore,
        safety: KeySafety | None = None,
        key_time: Callable[[], float] | None = None,
    ) -> None:
        """`safety`: opened from the queue, where `y` also approves, so a `y` meant for an ask must not
        write a rule: `y` counts only after this step was painted plus the grace (`core.keysafety`)."""
        super().__init__()
        self.offer = offer
        self.rules = rules
        self.safety = safety
        self.key_time = key_time
        self.targets = targets(rules)
        # The --rules file is the default; a pi config layer only when the person picks it (`t`).
        self.chosen = 0 if self.targets[0].kind == "authorizer" else -1
        self.change: Change | None = None

    def compose(self) -> ComposeResult:
        with Vertical(), VerticalScroll():
            yield PaintProbe(id="review-rule", markup=False)

    def on_mount(self) -> None:
        self._show()
        if self.safety is not None:
            self.query_one("#review-rule", PaintProbe).expect(self, self._painted)

    def _painted(self, token: Hashable) -> None:
        assert self.safety is not None
        self.safety.painted(token)
        ready = self.safety.ready_at()
        if ready is not None and not self.safety.accepting():
            self.set_timer(max(0.0, ready - self.safety.clock()) + 0.01, self.refresh_bindings)
        else:
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "confirm" and self.safety is not None and not self.safety.accepting())

    def _show(self) -> None:
        body = self.query_one("#review-rule", Static)
        self.change = None
        if self.chosen < 0:
            body.update(Content("No --rules file is configured: press t to pick a pi config file."))
            return
        target = self.targets[self.chosen]
        try:
            self.change = preview(self.offer, target.path)
        except (SuggestionRefused, OSError) as exc:
            body.update(
                Content.assemble(("Cannot add it to this file: ", "bold $text-error"), safe(str(exc)))
            )
            return
        hint = Content.styled("\n\ny write it   t other file   n cancel", "dim")
        body.update(change_content(self.change, target) + hint)

    def action_next_target(self) -> None:
        self.chosen = (self.chosen + 1) % len(self.targets)
        self._show()

    def action_confirm(self) -> None:
        if self.safety is not None and self.key_time is not None:
            verdict = self.safety.confirm(self, self.key_time())
            if verdict.outcome != "commit":
                self.notify(verdict.why, markup=False)
                return
        if self.change is None:
            self.notify("Nothing to write for this file.", severity="warning", markup=False)
            return
        try:
            apply(self.offer, self.change.path, confirmed=self.change, rules=self.rules)
        except (SuggestionRefused, OSError) as exc:
            self.notify(sanitize(str(exc), single_line=True).plain, severity="error", markup=False)
            self._show()
            return
        self.notify(sanitize(f"Rule added to {self.change.path}", single_line=True).plain, markup=False)
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


def _stamp(at: float | None) -> str | None:
    return None if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _wait(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s" if ms < 60_000 else f"{ms / 60_000:.1f} min"
