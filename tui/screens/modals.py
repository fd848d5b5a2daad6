"""Confirmation steps: whole-session grant, quit with pending asks, deny with reason, expand.

No modal has a clickable confirm: deciding takes a key press (no mouse path decides an ask), and
`esc` only ever goes back. The grant confirmation asks `core.keysafety.KeySafety` about its
decisive key: it counts only after a frame showing the confirmation was painted, plus the grace.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from core.asks import Ask, AskKey
from core.keysafety import KeySafety
from core.wire.request import SessionGrant
from tui.sanitize import sanitize
from tui.widgets.ask_view import (
    DIM,
    VALUE_LIMIT,
    WARN,
    Clip,
    agent_content,
    display_content,
    facts_content,
    grants_content,
    provenance_content,
    value_content,
)
from tui.widgets.painted import PaintProbe

T = TypeVar("T")



def keys_follow_grace(screen: ModalScreen[Any], safety: KeySafety, token: Hashable,
                      render_keys: Callable[[], None]) -> None:
    """A modal's frame was painted: start its grace there and redraw its keys when the grace ends."""
    safety.painted(token)
    render_keys()
    ready = safety.ready_at()
    if ready is not None and not safety.accepting():
        screen.set_timer(max(0.0, ready - safety.clock()) + 0.01, render_keys)


class AskModal(ModalScreen[T]):
    """A modal about one ask; the app dismisses it when that ask is withdrawn."""

    ask_key: AskKey | None = None


class GrantConfirmScreen(AskModal[bool]):
    """Second confirmation of a whole-serving-session grant: the exact rules, and what else it decides."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Record grant and approve", id="grant.confirm"),
        Binding("n", "cancel", "Cancel", id="grant.cancel"),
        Binding("escape", "cancel", "Back", id="grant.back"),
    ]

    def __init__(
        self,
        ask: Ask,
        grants: Sequence[SessionGrant],
        reach: Sequence[Ask],
        safety: KeySafety,
        key_time: Callable[[], float],
    ) -> None:
        """`reach`: the other pending asks the grant would decide; `key_time`: the key's read time."""
        super().__init__(classes="confirm")
        self.ask = ask
        self.ask_key = ask.key
        self.grants = tuple(grants)
        self.reach = tuple(reach)
        self.safety = safety
        self.key_time = key_time

    def compose(self) -> ComposeResult:
        sid = sanitize(self.ask.key.session_id, single_line=True).content("bold")
        with Vertical(id="dialog"):
            yield Static(
                Content.assemble(
                    ("Approve for the WHOLE serving session ", "bold"),
                    sid,
                ),
                markup=False,
            )
            yield Static(
                Content.assemble(
                    (
                        "This records the rule(s) below in this node's session rules. Every later ask from ",
                        "",
                    ),
                    ("any", "bold"),
                    (
                        " subagent of this session that matches is then approved without "
                        "asking, until this authorizer stops.",
                        "",
                    ),
                ),
                markup=False,
            )
            clip = Clip(None)
            yield Static(grants_content(self.ask, clip), id="grant-list", classes="panel", markup=False)
            yield Static(
                Content.assemble(
                    ("requested by ", DIM), agent_content(self.ask.request.requester_agent_name)
                ),
                markup=False,
            )
            yield Static(self._reach_content(), id="grant-reach", markup=False)
            yield PaintProbe(id="grant-keys", markup=False)

    def _reach_content(self) -> Content:
        count = len(self.reach)
        if not count:
            return Content.styled("It decides no other pending ask now.", DIM)
        asks = "1 other pending ask" if count == 1 else f"{count} other pending asks"
        lines = [Content.assemble(("It also approves ", "bold"), (asks, "bold $text-warning"),
                                  (" now (each recorded as decided by the grant):", "bold"))]
        for other in self.reach[:5]:
            lines.append(Content.assemble(
                ("  • ", DIM), agent_content(other.request.requester_agent_name, short=True), ("  ", ""),
                value_content(other.parsed.access_intent.match_values[0]
                              if other.parsed.access_intent and other.parsed.access_intent.match_values
                              else "", Clip(80))))
        if count > 5:
            lines.append(Content.styled(f"  … and {count - 5} more", DIM))
        return Content("\n").join(lines)

    def on_mount(self) -> None:
        self.query_one("#grant-list", Static).border_title = "Exactly what will be recorded"
        self._render_keys()
        self.query_one("#grant-keys", PaintProbe).expect(self, self._painted)

    def _painted(self, token: Hashable) -> None:
        keys_follow_grace(self, self.safety, token, self._render_keys)

    def _render_keys(self, note: str = "") -> None:
        waiting = not self.safety.accepting()
        self.query_one("#grant-keys", Static).update(
            Content.assemble(
                (" y ", "reverse bold" if not waiting else "reverse $text-muted"),
                (" record and approve   ", "" if not waiting else DIM),
                (" n / esc ", "reverse bold"),
                (" cancel (nothing is decided)", ""),
                (f"   {note}" if note else "", WARN),
            )
        )

    def action_confirm(self) -> None:
        verdict = self.safety.confirm(self, self.key_time())
        if verdict.outcome == "commit":
            self.dismiss(True)
        else:
            self._render_keys(verdict.why)

    def action_cancel(self) -> None:
        self.dismiss(False)


class GrantRefusedScreen(AskModal[None]):
    """Why a whole-session grant is refused (it would shadow a deny)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="refused.back"),
        Binding("enter", "close", "Back", show=False, id="refused.close"),
    ]

    def __init__(self, ask: Ask, reason: str) -> None:
        super().__init__(classes="confirm")
        self.ask = ask
        self.ask_key = ask.key
        self.reason = reason

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content.styled("Whole-session grant refused", "bold $text-error"), markup=False)
            yield Static(grants_content(self.ask, Clip(None)), id="grant-list", classes="panel", markup=False)
            yield Static(
                Content.assemble(("Reason: ", "bold"), value_content(self.reason, Clip(None))), markup=False
            )
            yield Static(Content.styled("The ask is still pending. esc: back", DIM), markup=False)

    def action_close(self) -> None:
        self.dismiss(None)


class GrantNoFactsScreen(AskModal[None]):
    """`w` on an ask without facts: why no whole-session grant can apply, and what can."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="nofacts.back"),
        Binding("enter", "close", "Back", show=False, id="nofacts.close"),
    ]

    def __init__(self, ask: Ask, once_key: str, session_key: str) -> None:
        super().__init__(classes="confirm")
        self.ask = ask
        self.ask_key = ask.key
        self.once_key = once_key
        self.session_key = session_key

    def compose(self) -> ComposeResult:
        lines = [
            Content.styled("No whole-session grant for this ask", "bold $text-warning"),
            Content(
                "This ask carries no child-fixed facts (no usable accessIntent, e.g. a 20.7.3 child). "
                "This node's rules never judge such an ask: it always comes to a person. A whole-session "
                "grant could therefore never match anything, so none is recorded."
            ),
            Content(""),
            Content.styled("What you can do instead (back on the queue):", "bold"),
            Content.assemble((f" {self.once_key} ", "reverse bold"), ("  approve this call once", "")),
        ]
        if self.ask.request.session_approval is not None:
            lines.append(Content.assemble(
                (f" {self.session_key} ", "reverse bold"),
                ("  approve for this subagent's session: the child records its own suggestion", "")))
        lines.append(Content(""))
        lines.append(Content.styled("Nothing was decided. esc: back", DIM))
        with Vertical(id="dialog"):
            yield Static(Content("\n").join(lines), id="nofacts-text", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)


class QuitConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Quit", id="quit.confirm"),
        Binding("n", "cancel", "Stay", id="quit.cancel"),
        Binding("escape", "cancel", "Stay", id="quit.back"),
    ]

    def __init__(self, pending: int) -> None:
        super().__init__(classes="confirm")
        self.pending = pending

    def compose(self) -> ComposeResult:
        asks = "1 ask" if self.pending == 1 else f"{self.pending} asks"
        with Vertical(id="dialog"):
            yield Static(Content.styled(f"Quit with {asks} still pending?", "bold"), markup=False)
            yield Static(
                "Nothing is denied. The requests stay in the inbox for the next authorizer; the children "
                "keep waiting until their own deadline. This authorizer's serving heartbeat is removed.",
                markup=False,
            )
            yield Static(
                Content.assemble(
                    (" y ", "reverse bold"), (" quit   ", ""), (" n / esc ", "reverse bold"), (" stay", "")
                ),
                markup=False,
            )

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class ReasonScreen(AskModal[str | None]):
    """One-line reason editor: required, relayed to the child's agent. `esc` goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back (nothing decided)", id="reason.back"),
    ]

    def __init__(self, ask: Ask) -> None:
        super().__init__(classes="confirm")
        self.ask = ask
        self.ask_key = ask.key

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(
                Content.assemble(
                    ("Deny with a reason — ", "bold"), agent_content(self.ask.request.requester_agent_name)
                ),
                markup=False,
            )
            what = Static(batch_line(None, self.ask, Clip(VALUE_LIMIT)), id="reason-ask", classes="panel",
                          markup=False)
            what.border_title = "The ask you are denying"
            yield what
            yield Static("The reason is relayed to the child's agent. enter: deny · esc: back", markup=False)
            yield Input(
                placeholder="Reason shown back to the agent", id="reason-input", select_on_focus=False
            )
            yield Static(id="reason-error", markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        reason = event.value.strip()
        if not reason:
            self.query_one("#reason-error", Static).update(Content.styled("A reason is required.", WARN))
            return
        self.dismiss(reason)

    def action_back(self) -> None:
        self.dismiss(None)


class ExpandScreen(AskModal[None]):
    """Every value of the ask, unshortened (still sanitised)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="expand.back"),
        Binding("enter", "close", "Back", show=False, id="expand.close"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="expand.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="expand.up"),
    ]

    def __init__(self, ask: Ask) -> None:
        super().__init__(classes="expand")
        self.ask = ask
        self.ask_key = ask.key

    def compose(self) -> ComposeResult:
        clip = Clip(None)
        with VerticalScroll(id="expand-body"):
            yield Static(Content.styled("Full ask (nothing shortened) — esc: back", "bold"), markup=False)
            for title, build in (
                ("Facts — fixed by the child", facts_content),
                ("Why this node asks — provenance", provenance_content),
                ("Session grant it would record", grants_content),
                ("Child's rendering — display only, not facts", display_content),
            ):
                panel = Static(build(self.ask, clip), classes="panel", markup=False)
                panel.border_title = title
                yield panel

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#expand-body", VerticalScroll).scroll_relative(y=lines, animate=False)


BATCH_VERBS = {"approve": "Approve once", "deny": "Deny"}
#: What each agent reads when a batch is denied and the person typed no reason.
BATCH_DENY_REASON = "Denied by the person at pi-authorizer in a batch decision (no reason was typed)."


def batch_line(index: int | None, ask: Ask, clip: Clip) -> Content:
    """One ask (of a batch): agent, surface and every value, exactly as the child sent them."""
    intent = ask.parsed.access_intent
    surface = intent.surface if intent is not None else (ask.request.surface or "?")
    values = list(intent.match_values) if intent is not None else [ask.request.value or ""]
    head = Content.assemble(
        (f"{index:>3}. " if index is not None else "", DIM),
        agent_content(ask.request.requester_agent_name, clip, short=True),
        ("  ", ""),
        value_content(surface, clip, "bold"),
        ("" if ask.has_facts else "  (no facts: the child's display text)", DIM),
    )
    indent = "       " if index is not None else "  "
    rows = [head, *(Content.assemble((indent, ""), value_content(v, clip)) for v in values)]
    return Content("\n").join(rows)


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
        Binding("escape", "cancel", "Back (nothing decided)", id="batch.back"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="batch.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="batch.up"),
        Binding("pagedown", "scroll(8)", "Page down", show=False, id="batch.page_down"),
        Binding("pageup", "scroll(-8)", "Page up", show=False, id="batch.page_up"),
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

    def compose(self) -> ComposeResult:
        count = len(self.included)
        asks = "1 ask" if count == 1 else f"{count} asks"
        style = "bold $text-success" if self.verb == "approve" else "bold $text-error"
        with Vertical(id="dialog"):
            yield Static(Content.assemble((f"{BATCH_VERBS[self.verb]} ", style), (f"these {asks}?", "bold")),
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
            if self.verb == "deny":
                yield Input(placeholder=f"Reason relayed to every agent (r) — empty: {BATCH_DENY_REASON}",
                            id="batch-reason", select_on_focus=False)
            yield PaintProbe(id="batch-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#batch-list", VerticalScroll).border_title = "Exactly what will be decided"
        self._render_keys()
        self.query_one("#batch-keys", PaintProbe).expect(self, self._painted)

    def _painted(self, token: Hashable) -> None:
        """The grace window counts from the frame that shows the list, not from construction."""
        keys_follow_grace(self, self.safety, token, self._render_keys)

    def gate(self) -> str:
        """The one place a batch confirmation is judged: "commit", "arm" or "ignore"."""
        if self.safety.confirm(self, self.key_time()).outcome != "commit":
            return "ignore"
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
                (" esc ", "reverse bold"), (" cancel (nothing is decided)", "")))
            return
        reason = ((" r ", "reverse bold"), (" reason   ", "")) if self.verb == "deny" else ()
        self.query_one("#batch-keys", Static).update(Content.assemble(
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

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#batch-list", VerticalScroll).scroll_relative(y=lines, animate=False)
