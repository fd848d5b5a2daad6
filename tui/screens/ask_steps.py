"""Steps over one ask: the base of every such modal, the reason editor, the expanded ask.

No modal has a clickable confirm: deciding takes a key press (no mouse path decides an ask), and
`esc` only ever goes back. A step's decisive key asks `tui.keysafety.KeySafety`: it counts only
after a frame showing the step was painted, plus the grace (`keys_after_paint`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, ClassVar, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from core.vocabulary.asks import Ask, AskKey
from tui.keysafety import KeySafety
from tui.render.ask import (
    Clip,
    agent_content,
    display_content,
    facts_content,
    grants_content,
    provenance_content,
)
from tui.render.ask_facts import VALUE_LIMIT
from tui.render.lines import batch_line
from tui.render.styles import WARN
from tui.widgets.painted import PaintProbe

T = TypeVar("T")


def unseen(scroll: ScrollableContainer) -> bool:
    """Part of a step's content is below what was on screen: its keys say how to see it first."""
    return scroll.max_scroll_y > 0 and scroll.scroll_y < scroll.max_scroll_y


def keys_follow_scroll(screen: ModalScreen[Any], scroll: ScrollableContainer,
                       render_keys: Callable[[], None]) -> None:
    """A step's key line says "more below" exactly while part of its content is unseen: drawn again
    whenever the content scrolls or changes size (a scroll applied after the frame that asked for it,
    or a key line whose own height moves the end, never leaves a stale note)."""
    screen.watch(scroll, "scroll_y", lambda _: render_keys(), init=False)
    screen.watch(scroll, "virtual_size", lambda _: render_keys(), init=False)


def keys_after_paint(screen: ModalScreen[Any], probe: PaintProbe, safety: KeySafety,
                     render_keys: Callable[[], None]) -> None:
    """A step's grace starts at the first frame `probe` paints; its keys are drawn again then and
    when the grace ends."""

    def painted(token: Hashable) -> None:
        safety.painted(token)
        render_keys()
        ready = safety.ready_at()
        if ready is not None and not safety.accepting():
            screen.set_timer(max(0.0, ready - safety.clock()) + 0.01, render_keys)

    probe.expect(screen, painted)


class AskModal(ModalScreen[T]):
    """A modal about one ask; the app dismisses it when that ask (`ask_key`) is withdrawn."""

    def __init__(self, ask: Ask, classes: str = "confirm") -> None:
        super().__init__(classes=classes)
        self.ask = ask
        self.ask_key: AskKey = ask.key


def back_keys(area: str, *own: BindingType) -> list[BindingType]:
    """`esc` (and a hidden `enter`) go back, then the step's `own` keys; ids `<area>.back`, `.close`."""
    return [
        Binding("escape", "close", "Back", id=f"{area}.back"),
        Binding("enter", "close", "Back", show=False, id=f"{area}.close"),
        *own,
    ]


class BackModal(AskModal[None]):
    """A read-only step about one ask: every key of `back_keys` only goes back."""

    def action_close(self) -> None:
        self.dismiss(None)


class ReasonScreen(AskModal[str | None]):
    """One-line reason editor: required, relayed to the child's agent. `esc` goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back (nothing decided)", id="reason.back"),
    ]

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


class ExpandScreen(BackModal):
    """Every value of the ask, unshortened (still sanitised)."""

    BINDINGS: ClassVar[list[BindingType]] = back_keys(
        "expand",
        Binding("j,down", "scroll(1)", "Down", show=False, id="expand.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="expand.up"),
    )

    def __init__(self, ask: Ask) -> None:
        super().__init__(ask, classes="expand")

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

    def action_scroll(self, lines: int) -> None:
        self.query_one("#expand-body", VerticalScroll).scroll_relative(y=lines, animate=False)
