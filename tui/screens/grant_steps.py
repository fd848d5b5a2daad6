"""The whole-session grant's steps: its confirmation (exactly what is recorded and what else it decides
now), a refusal (it would loosen a deny), and the note for an ask without facts (nothing to record).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from core.vocabulary.asks import Ask
from core.wire.request import SessionGrant
from tui.keysafety import KeySafety
from tui.render.ask import (
    Clip,
    agent_content,
    grants_content,
    reach_content,
    value_content,
)
from tui.render.styles import DIM, WARN
from tui.sanitize import sanitize
from tui.screens.ask_steps import AskModal, BackModal, back_keys, keys_after_paint, keys_follow_scroll, unseen
from tui.widgets.painted import PaintProbe


class GrantConfirmScreen(AskModal[bool]):
    """Second confirmation of a whole-serving-session grant: the exact rules, and what else it decides."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Record grant and approve", id="grant.confirm"),
        Binding("n", "cancel", "Cancel", id="grant.cancel"),
        Binding("escape", "cancel", "Back", id="grant.back"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="grant.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="grant.up"),
        Binding("pagedown", "scroll(8)", "Page down", show=False, id="grant.page_down"),
        Binding("pageup", "scroll(-8)", "Page up", show=False, id="grant.page_up"),
        Binding("end", "scroll_end", "End", show=False, id="grant.end"),
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
        super().__init__(ask)
        self.grants = tuple(grants)
        self.reach = tuple(reach)
        self.safety = safety
        self.key_time = key_time

    def compose(self) -> ComposeResult:
        sid = sanitize(self.ask.key.session_id, single_line=True).content("bold")
        with Vertical(id="dialog"):
            yield PaintProbe(id="grant-keys", markup=False)  # docked: painted at every size (finding 8)
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
            with VerticalScroll(id="grant-body"):
                clip = Clip(None)
                yield Static(grants_content(self.ask, clip), id="grant-list", classes="panel", markup=False)
                yield Static(
                    Content.assemble(
                        ("requested by ", DIM), agent_content(self.ask.request.requester_agent_name)
                    ),
                    markup=False,
                )
                yield Static(self._reach_content(), id="grant-reach", markup=False)

    def _reach_content(self) -> Content:
        return reach_content(self.reach, "the grant", others=True)

    def on_mount(self) -> None:
        self.query_one("#grant-list", Static).border_title = "Exactly what will be recorded"
        self._render_keys()
        keys_after_paint(self, self.query_one("#grant-keys", PaintProbe), self.safety, self._render_keys)
        keys_follow_scroll(self, self.query_one("#grant-body", VerticalScroll), self._render_keys)

    def _render_keys(self, note: str = "") -> None:
        waiting = not self.safety.accepting()
        if not note and unseen(self.query_one("#grant-body", VerticalScroll)):
            note = "more below: scroll (j / pgdn / end) to see it all before y"
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
        if verdict.outcome != "commit":
            self._render_keys(verdict.why)
        elif unseen(self.query_one("#grant-body", VerticalScroll)):
            self._render_keys("Not all of it has been on screen: scroll (j / pgdn / end) to its end, then y.")
        else:
            self.dismiss(True)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#grant-body", VerticalScroll).scroll_relative(y=lines, animate=False)
        self.call_after_refresh(self._render_keys)

    def action_scroll_end(self) -> None:
        self.query_one("#grant-body", VerticalScroll).scroll_end(animate=False, immediate=True)
        self.call_after_refresh(self._render_keys)

    def action_cancel(self) -> None:
        self.dismiss(False)


class GrantRefusedScreen(BackModal):
    """Why a whole-session grant is refused (it would shadow a deny)."""

    BINDINGS: ClassVar[list[BindingType]] = back_keys("refused")

    def __init__(self, ask: Ask, reason: str) -> None:
        super().__init__(ask)
        self.reason = reason

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content.styled("Whole-session grant refused", "bold $text-error"), markup=False)
            yield Static(grants_content(self.ask, Clip(None)), id="grant-list", classes="panel", markup=False)
            yield Static(
                Content.assemble(("Reason: ", "bold"), value_content(self.reason, Clip(None))), markup=False
            )
            yield Static(Content.styled("The ask is still pending. esc: back", DIM), markup=False)


class GrantNoFactsScreen(BackModal):
    """`w` on an ask without facts: why no whole-session grant can apply, and what can."""

    BINDINGS: ClassVar[list[BindingType]] = back_keys("nofacts")

    def __init__(self, ask: Ask, once_key: str, session_key: str) -> None:
        super().__init__(ask)
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
