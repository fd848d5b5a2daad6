"""The queue's key legend: a plain two-line text (never clickable), the decisions above the batch keys,
each key as currently bound, usable keys bright, and the words of `tui.actions` (long when they fit).

`legend_content` is a pure function of what is on screen, so the legend reads the same in tests as on
screen; the widget paints it only when it changed (moving through the queue mostly leaves it as is).
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from core.person import Person, proven_direction
from core.vocabulary.asks import Ask
from tui.actions import LEGEND
from tui.render.ask_facts import ask_has_hidden
from tui.render.styles import DIM, WARN


def legend_content(
    ask: Ask | None,
    *,
    grace: bool,
    armed: str | None,
    double_press: bool,
    labels: dict[str, str],
    marked: int,
    width: int,
) -> Content:
    """Two lines of keys: the decisions the selected ask allows (`s` only with the child's suggestion,
    `b` only when it proves one direction, `w` only with facts: never a key that cannot act on it) and
    the batch keys; the long
    words when they fit in `width`, else the short ones. `armed`: the action of an armed first press."""
    grants = Person.serving_grants_of(ask) if ask is not None else ()
    has_grants = bool(grants)
    possible = {"approve_session": has_grants,
                "approve_session_both": proven_direction(grants) is not None,
                "approve_serving": has_grants and ask is not None and ask.has_facts}
    first = Content("")
    for wording in (0, 1):
        parts: list[tuple[str, str]] = []
        for action, legend in LEGEND["decisions"]:
            if not possible.get(action, True) and (ask is not None or action == "approve_session_both"):
                continue  # a key that cannot act on this ask is not offered (`b`: as in pi)
            usable = ask is not None and possible.get(action, True) and not grace
            key_style = "reverse bold" if usable else "reverse dim"
            if armed == action:
                key_style = "reverse bold $text-warning"
            parts.append((f" {labels[action]} ", key_style))
            parts.append((f" {(legend.long, legend.short)[wording]}  ", "" if usable else DIM))
        if ask is not None and grace:
            parts.append((("⏳ keys wait a moment (just shown)", "⏳ wait")[wording], WARN))
        elif ask is not None and (double_press or ask_has_hidden(ask)):
            parts.append((("press twice to commit", "twice")[wording], DIM))
        first = Content.assemble(*parts)
        if first.cell_length <= width:
            break
    batch = Content("")
    for wording in (0, 1):
        batch_parts: list[tuple[str, str]] = []
        for action, legend in LEGEND["batch"]:
            usable = ask is not None and (marked > 0 or action.startswith(("mark", "filter")))
            batch_parts.append((f" {labels[action]} ", "reverse bold" if usable else "reverse dim"))
            batch_parts.append((f" {(legend.long, legend.short)[wording]}  ", "" if usable else DIM))
        if marked:
            batch_parts.append((f"{marked} marked", "bold $text-accent"))
        batch = Content.assemble(*batch_parts)
        if batch.cell_length <= width:
            break
    return Content("\n").join([first, batch])


class KeyLegend(Static):
    """Paints `legend_content` for what it is shown (`show_keys`), only when that changed."""

    def __init__(self, id: str) -> None:
        super().__init__(id=id, markup=False)
        self._shown: Content | None = None

    def show_keys(self, ask: Ask | None, *, grace: bool, armed: str | None, double_press: bool,
                  labels: dict[str, str], marked: int, width: int) -> None:
        legend = legend_content(ask, grace=grace, armed=armed, double_press=double_press, labels=labels,
                                marked=marked, width=width)
        if legend != self._shown:
            self._shown = legend
            self.update(legend)

    @property
    def text(self) -> str:
        return str(self.render())
