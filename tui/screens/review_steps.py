"""The review's steps over the list: one past ask, the suggested rules, and the rule's confirm step.

A suggested rule is written only from `ConfirmRuleScreen`, which shows the exact JSON, the target
file and the diff first; opened from the queue (`R`), its `y` also waits for the paint and grace.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from core.history import HistoryRow
from core.history.overturn import overturn
from core.history.rows import APPROVED_STATES
from core.history.rule_edit import RuleEdit, apply, preview, targets
from core.history.suggest import Suggestion, SuggestionRefused
from core.judging.model_judge import JUDGE_NAME
from core.rules import PolicyStore
from core.vocabulary.asks import Ask
from tui.keysafety import KeySafety
from tui.render.ask import reach_content
from tui.render.history import change_content, detail_content, offer_content, safe
from tui.sanitize import sanitize
from tui.screens.ask_steps import keys_after_paint, keys_follow_scroll, unseen
from tui.widgets.painted import PaintProbe


@dataclass(frozen=True)
class RuleReach:
    """What a written rule decides at once: `of` lists the pending asks a file's new text would decide
    (shown with the diff), `decide` decides exactly the listed asks after the write (`R` and the
    review's suggestions alike; `docs/design/workflows.md`)."""

    of: Callable[[Path, str], tuple[Ask, ...]]
    decide: Callable[[Sequence[Ask]], Awaitable[None]]


class DetailScreen(ModalScreen[None]):
    """One past ask, read-only; a model judge's verdict on it can be overturned (`o`: the reverse rule,
    through `ConfirmRuleScreen`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Back", id="review.detail.back"),
        Binding("o", "overturn", "Overturn the judge", id="review.detail.overturn",
                tooltip="A model judge decided this ask: propose the rule that decides it the other way"),
    ]

    def __init__(self, row: HistoryRow, rules: PolicyStore | None = None) -> None:
        super().__init__()
        self.row = row
        self.rules = rules

    def action_overturn(self) -> None:
        row, source = self.row, self.row.decided_by_json() or {}
        if source.get("kind") != "authorizer" or source.get("name") != JUDGE_NAME or self.rules is None:
            self.notify("Only a model judge's verdict can be overturned (and this node needs rules to add "
                        "to).", markup=False)
            return
        verdict = "allow" if row.verdict in APPROVED_STATES else "deny"
        try:
            offer = overturn(self.rules, verdict, row.surface or "", row.value, time.time())
        except SuggestionRefused as exc:
            self.notify(sanitize(str(exc), single_line=True).plain, title="No rule proposed",
                        severity="warning", markup=False)
            return
        self.app.push_screen(ConfirmRuleScreen(offer, self.rules))

    def compose(self) -> ComposeResult:
        with Vertical(), VerticalScroll():
            yield Static(detail_content(self.row), id="review-detail", markup=False)


class SuggestionsScreen(ModalScreen[None]):
    """Rules the person's repeated approvals suggest; choosing one opens its confirm step."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Back", id="review.suggestions.back"),
    ]

    def __init__(self, offers: list[Suggestion], rules: PolicyStore, reach: RuleReach | None = None) -> None:
        super().__init__()
        self.offers = offers
        self.rules = rules
        self.reach = reach

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Content.styled("Suggested rules (enter to review one)", "bold"), markup=False)
            yield OptionList(
                *(Option(self._prompt(o), id=str(i)) for i, o in enumerate(self.offers)),
                id="review-offers",
            )

    def _prompt(self, offer: Suggestion) -> Content:
        return offer_content(offer, self.rules.home)

    @on(OptionList.OptionSelected, "#review-offers")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        offer = self.offers[int(event.option.id or 0)]
        self.app.push_screen(ConfirmRuleScreen(offer, self.rules, reach=self.reach))


class ConfirmRuleScreen(ModalScreen[bool]):
    """The only place a suggested rule is written: `y` after reading the JSON, file and diff."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Write the rule", id="review.rule.confirm"),
        Binding("t", "next_target", "Other file", id="review.rule.target"),
        Binding("n,escape", "cancel", "Cancel", id="review.rule.cancel"),
        # Over the focused scroll's own keys (its `end` animates, and took a second press to arrive).
        Binding("j,down", "scroll(1)", "Down", show=False, priority=True, id="review.rule.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, priority=True, id="review.rule.up"),
        Binding("pagedown", "scroll(8)", "Page down", show=False, priority=True, id="review.rule.page_down"),
        Binding("pageup", "scroll(-8)", "Page up", show=False, priority=True, id="review.rule.page_up"),
        Binding("end", "scroll_end", "End", show=False, priority=True, id="review.rule.end"),
    ]

    def __init__(
        self,
        offer: Suggestion,
        rules: PolicyStore,
        safety: KeySafety | None = None,
        key_time: Callable[[], float] | None = None,
        reach: RuleReach | None = None,
    ) -> None:
        """`safety`: opened from the queue, where `y` also approves, so a `y` meant for an ask must not
        write a rule: `y` counts only after this step was painted plus the grace (`tui.keysafety`).
        `reach`: the pending asks the file's new text would decide at once, listed with the diff;
        exactly that painted list (`self.reach`) is decided after the write."""
        super().__init__()
        self.offer = offer
        self.rules = rules
        self.safety = safety
        self.key_time = key_time
        self.targets = targets(rules)
        # The --rules file is the default; a pi config layer only when the person picks it (`t`).
        self.chosen = 0 if self.targets[0].kind == "authorizer" else -1
        self.change: RuleEdit | None = None
        self.rule_reach = reach
        self.reach: tuple[Ask, ...] = ()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="review-rule-keys", markup=False)  # docked: painted at every size (finding 8)
            with VerticalScroll(id="review-rule-body"):
                yield PaintProbe(id="review-rule", markup=False)

    def on_mount(self) -> None:
        self._show()
        self.call_after_refresh(self._render_keys)
        keys_follow_scroll(self, self.query_one("#review-rule-body", VerticalScroll), self._render_keys)
        if self.safety is not None:
            probe = self.query_one("#review-rule", PaintProbe)
            keys_after_paint(self, probe, self.safety, self.refresh_bindings)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "confirm" and self.safety is not None and not self.safety.accepting())

    def _show(self) -> None:
        body = self.query_one("#review-rule", Static)
        self.change = None
        self.reach = ()
        if self.chosen < 0:
            body.update(Content("No rules file is set (start pi-authorizer with --rules FILE for one): "
                                "press t to pick a pi config file."))
            return
        target = self.targets[self.chosen]
        try:
            self.change = preview(self.offer, target.path, self.rules)
        except (SuggestionRefused, OSError) as exc:
            body.update(
                Content.assemble(("Cannot add it to this file: ", "bold $text-error"), safe(str(exc)))
            )
            return
        decides = None
        if self.rule_reach is not None:
            self.reach = self.rule_reach.of(self.change.path, self.change.after)
            decides = reach_content(self.reach, "this rule", others=False)
        body.update(change_content(self.change, target, self.rules.home, decides))
        self.call_after_refresh(self._render_keys)

    def _render_keys(self, note: str = "") -> None:
        if not note and unseen(self.query_one("#review-rule-body", VerticalScroll)):
            note = "more below: scroll (j / pgdn / end) to see the whole diff before y"
        self.query_one("#review-rule-keys", Static).update(Content.assemble(
            ((note + "\n") if note else "", "bold $text-warning"),
            (" y ", "reverse bold"), (" write it   ", ""), (" t ", "reverse bold"), (" other file   ", ""),
            (" n / esc ", "reverse bold"), (" cancel (nothing is written)", "")))

    def action_scroll(self, lines: int) -> None:
        self.query_one("#review-rule-body", VerticalScroll).scroll_relative(y=lines, animate=False)
        self.call_after_refresh(self._render_keys)

    def action_scroll_end(self) -> None:
        self.query_one("#review-rule-body", VerticalScroll).scroll_end(animate=False, immediate=True)
        self.call_after_refresh(self._render_keys)

    def action_next_target(self) -> None:
        """Another file: another diff and other asks decided, so a step shown anew: from its top, and
        (from the queue) its `y` counts only after this new content was painted, plus the grace."""
        self.chosen = (self.chosen + 1) % len(self.targets)
        self._show()
        self.query_one("#review-rule-body", VerticalScroll).scroll_home(animate=False, immediate=True)
        if self.safety is not None:
            self.safety.open_modal(self)
            keys_after_paint(self, self.query_one("#review-rule", PaintProbe), self.safety,
                             self.refresh_bindings)
        self.call_after_refresh(self._render_keys)

    def action_confirm(self) -> None:
        if self.safety is not None and self.key_time is not None:
            verdict = self.safety.confirm(self, self.key_time())
            if verdict.outcome != "commit":
                self.notify(verdict.why, markup=False)
                return
        if self.chosen < 0:
            why = ("No rules file is set, so there is nowhere to write it by default: start pi-authorizer "
                   "with --rules FILE (its own rules), or press t to pick a pi config file.")
            self._render_keys(why)
            self.notify(why, title="Not written", severity="warning", markup=False)
            return
        if self.change is None:
            self.notify("Nothing to write for this file.", severity="warning", markup=False)
            return
        if unseen(self.query_one("#review-rule-body", VerticalScroll)):
            self._render_keys("Not all of the diff has been on screen: scroll (j / pgdn / end) to its end, "
                              "then y.")
            return
        try:
            apply(self.offer, self.change.path, confirmed=self.change, rules=self.rules)
        except (SuggestionRefused, OSError) as exc:
            self.notify(sanitize(str(exc), single_line=True).plain, severity="error", markup=False)
            self._show()
            return
        self.notify(sanitize(f"Rule added to {self.change.path}", single_line=True).plain, markup=False)
        painted = self.reach  # exactly the asks listed with the diff, never re-derived
        self.dismiss(True)
        if painted and self.rule_reach is not None:
            self.app.run_worker(self.rule_reach.decide(painted), group="written-rule")

    def action_cancel(self) -> None:
        self.dismiss(False)
