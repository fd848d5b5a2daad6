"""The queue's status line: one literal note under the selected ask (the outcome of a key, an ask
decided or withdrawn elsewhere, a notice on a small terminal), which goes when its time is up or, for
a note about one ask, when another ask is selected."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from core.clock import SYSTEM_CLOCK
from core.vocabulary.asks import AskKey
from tui.sanitize import visible


class StatusLine(Static):
    """Paints the note it is told (`say`), always literally; forgets it at its time (`expire`)."""

    def __init__(self, id: str) -> None:
        super().__init__(id=id, markup=False)
        #: The ask the note is about (cleared when another ask is selected), or None.
        self.about: AskKey | None = None
        self._until: float | None = None
        self._shown = False

    def say(self, content: Content | str, *, about: AskKey | None = None, ttl: float | None = None) -> None:
        """Show `content` (empty clears). `about`: the ask it is about; `ttl`: seconds it stays."""
        self.about = about
        self._until = None if ttl is None else SYSTEM_CLOCK.monotonic() + ttl
        if content or self._shown:
            self.update(visible(content if isinstance(content, Content) else Content(content)))
        self._shown = bool(content)

    def expire(self) -> None:
        """A note past its time goes (the screen calls this once a second)."""
        if self._until is not None and SYSTEM_CLOCK.monotonic() > self._until:
            self.say("")

    @property
    def text(self) -> str:
        return str(self.render())
