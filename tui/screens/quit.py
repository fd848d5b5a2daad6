"""Quitting with asks pending: they stay in their inbox for the next authorizer; confirm first."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static


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
