"""The batch preview: every ask a batch would answer, listed in full; one confirmation decides them all."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from core.vocabulary.asks import Ask
from tui.keysafety import KeySafety
from tui.render.ask import (
    Clip,
    agent_content,
)
from tui.render.lines import batch_line
from tui.render.styles import DIM, WARN
from tui.screens.ask_steps import keys_after_paint, keys_follow_scroll, unseen
from tui.widgets.painted import PaintProbe

BATCH_VERBS = {"approve": "Approve once", "deny": "Deny"}
#: What each agent reads when a batch is denied and the person typed no reason.
BATCH_DENY_REASON = "Denied by the person at pi-authorizer in a batch decision (no reason was typed)."


class BatchPreviewScreen(ModalScreen[bool]):
    """Every ask a batch decision would answer, listed in full; one confirmation decides them all.

    `y` counts only once a frame showing the list was painted, plus the grace (`KeySafety.confirm`,
    as for every confirmation step) and, with double press on, arms on the first press and commits on
    the second: the same rules as a single decision, through one gate (`gate`). Asks that cannot be
    batched (hidden characters, values too long to show whole) are listed apart and left pending,
    for an individual look. A batch denial always carries a reason each agent can read: the one the
    person types (`r`), else `BATCH_DENY_REASON`. While the reason field has focus every key types
    into it and none decides; `enter` gives the keys back.
    """

    AUTO_FOCUS = ""  # the keys belong to the preview; the reason field takes focus only on `r`
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Decide every listed ask", id="batch.confirm"),
        Binding("n", "cancel", "Cancel", id="batch.cancel"),
        Binding("r", "reason", "Type the reason relayed to every agent (deny)", id="batch.reason"),
        Binding("escape", "back", "Back (nothing decided; from the reason: keep it, back to the list)",
                id="batch.back"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="batch.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="batch.up"),
        Binding("pagedown", "scroll(8)", "Page down", show=False, id="batch.page_down"),
        Binding("pageup", "scroll(-8)", "Page up", show=False, id="batch.page_up"),
        Binding("end", "scroll_end", "End of the list", show=False, id="batch.end"),
    ]

    def __init__(
        self,
        verb: str,
        included: Sequence[Ask],
        excluded: Sequence[tuple[Ask, str]],
        safety: KeySafety,
        key_time: Callable[[], float],
        *,
        double_press: bool,
    ) -> None:
        """`safety`: the queue's key safety (the queue calls `open_modal(self)` when it pushes this)."""
        super().__init__(classes="confirm batch")
        self.verb = verb
        self.included = tuple(included)
        self.excluded = tuple(excluded)
        self.safety = safety
        self.key_time = key_time
        self._double_press = double_press
        self._armed = False
        #: Why this preview no longer shows exactly what is pending (an ask withdrawn or replaced
        #: under its id): the step can then only be left, and says so. None while it holds.
        self.changed: str | None = None
        #: The last key press that did not count, and why (shown on the key line, never silent).
        self._ignored: str | None = None

    def compose(self) -> ComposeResult:
        count = len(self.included)
        asks = "this ask" if count == 1 else f"these {count} asks"
        style = "bold $text-success" if self.verb == "approve" else "bold $text-error"
        with Vertical(id="dialog"):
            yield Static(Content.assemble((f"{BATCH_VERBS[self.verb]} ", style), (f"{asks}?", "bold")),
                         markup=False)
            yield Static(Content.styled(
                "Each is answered and recorded on its own, exactly as if decided alone. Nothing else is "
                "decided: asks that arrive meanwhile wait in the queue.", DIM), markup=False)
            with VerticalScroll(id="batch-list"):
                clip = Clip(None)
                lines = [batch_line(i, ask, clip) for i, ask in enumerate(self.included, 1)]
                yield Static(Content("\n").join(lines), id="batch-included", markup=False)
                if self.excluded:
                    out = [Content.styled(f"Not in this batch ({len(self.excluded)}): look at each alone",
                                          "bold $text-warning")]
                    for ask, why in self.excluded:
                        out.append(Content.assemble(("  • ", DIM), agent_content(
                            ask.request.requester_agent_name, Clip(40), short=True), (f" — {why}", WARN)))
                    yield Static(Content("\n").join(out), id="batch-excluded", markup=False)
            with Vertical(id="batch-foot"):  # docked: on screen at every size (issue 20 finding 8)
                if self.verb == "deny":
                    yield Input(placeholder=f"Reason relayed to every agent (r) — empty: {BATCH_DENY_REASON}",
                                id="batch-reason", select_on_focus=False)
                yield PaintProbe(id="batch-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#batch-list", VerticalScroll).border_title = "Exactly what will be decided"
        self._render_keys()
        # The grace window counts from the frame that shows the list, not from construction.
        keys_after_paint(self, self.query_one("#batch-keys", PaintProbe), self.safety, self._render_keys)
        keys_follow_scroll(self, self.query_one("#batch-list", VerticalScroll), self._render_keys)

    def ask_changed(self, why: str) -> None:
        """One of the listed asks was withdrawn or replaced under its id: the batch is cancelled, the
        step says why and decides nothing (`esc` leaves it)."""
        if self.changed is None:
            self.changed = why
            self._armed = False
            self._render_keys()

    def gate(self) -> str:
        """The one place a batch confirmation is judged: "commit", "arm" or "ignore"."""
        if self.changed is not None:
            return "ignore"
        verdict = self.safety.confirm(self, self.key_time())
        if verdict.outcome != "commit":
            self._ignored = verdict.why
            return "ignore"
        if unseen(self.query_one("#batch-list", VerticalScroll)):
            self._ignored = ("Not every listed ask has been on screen: scroll the list to its end "
                             "(j / pgdn / end), then y.")
            return "ignore"
        self._ignored = None
        if self._double_press and not self._armed:
            return "arm"
        return "commit"

    def _waiting(self) -> bool:
        return not self.safety.accepting()

    @property
    def reason(self) -> str | None:
        """The reason a batch denial relays (None for an approval): typed, or the default."""
        if self.verb != "deny":
            return None
        typed = self.query_one("#batch-reason", Input).value.strip()
        return typed or BATCH_DENY_REASON

    @property
    def typing(self) -> bool:
        return self.verb == "deny" and self.focused is self.query_one("#batch-reason", Input)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "reason":
            return self.verb == "deny"
        return not (action == "confirm" and self.typing)

    def action_reason(self) -> None:
        self.query_one("#batch-reason", Input).focus()
        self._render_keys()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.set_focus(None)
        self._render_keys()

    def _render_keys(self) -> None:
        if self.changed is not None:
            self.query_one("#batch-keys", Static).update(Content.assemble(
                ("⚠ Batch cancelled: ", "bold $text-error"), (self.changed, ""),
                (". Nothing was decided. ", "bold"), (" esc ", "reverse bold"),
                (" back to the queue, then mark and preview again", "")))
            return
        waiting = self._waiting()
        count = len(self.included)
        what = f"approve all {count} once" if self.verb == "approve" else f"deny all {count}"
        if self._armed:
            first = (f" press y again to {what} ", "reverse bold $text-warning")
        else:
            first = (" y ", "reverse bold" if not waiting else "reverse $text-muted")
        if self.typing:
            self.query_one("#batch-keys", Static).update(Content.assemble(
                ("typing the reason: ", "bold"), (" enter ", "reverse bold"), (" done   ", ""),
                (" esc ", "reverse bold"), (" keep it, back to the list (nothing is decided)", "")))
            return
        reason = ((" r ", "reverse bold"), (" reason   ", "")) if self.verb == "deny" else ()
        hidden = unseen(self.query_one("#batch-list", VerticalScroll))
        note: tuple[tuple[str, str], ...] = ()
        if hidden:
            note = (("more below: scroll (j / pgdn / end) to see every ask before y\n", WARN),)
        elif self._ignored is not None:
            note = ((self._ignored + "\n", WARN),)
        self.query_one("#batch-keys", Static).update(Content.assemble(
            *note,
            first,
            ("" if self._armed else f" {what}   ", "" if not waiting else DIM),
            *reason,
            ("  n / esc ", "reverse bold"),
            (" cancel (nothing is decided)   ", ""),
            ("j/k scroll", DIM),
        ))

    def action_confirm(self) -> None:
        verdict = self.gate()
        if verdict == "commit":
            self.dismiss(True)
        elif verdict == "arm":
            self._armed = True
            self._render_keys()
        else:
            self._render_keys()
            if self.changed is None and self._ignored is not None:
                self.notify(self._ignored, severity="warning", markup=False, timeout=4)

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_back(self) -> None:
        """`esc`: out of the reason field (what was typed stays, as in the single reason editor),
        else out of the preview."""
        if self.typing:
            self.set_focus(None)
            self._render_keys()
            return
        self.dismiss(False)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#batch-list", VerticalScroll).scroll_relative(y=lines, animate=False)
        self.call_after_refresh(self._render_keys)

    def action_scroll_end(self) -> None:
        self.query_one("#batch-list", VerticalScroll).scroll_end(animate=False, immediate=True)
        self.call_after_refresh(self._render_keys)
