"""The queue's key legend: a plain two-line text (never clickable), the decisions above the batch keys.

A pure function of what is on screen, so the legend reads the same in tests as on screen.
"""

from __future__ import annotations

from textual.content import Content

from core.person import HumanAuthorizer, proven_direction
from core.serving.asks import Ask
from tui.render.facts import ask_has_hidden
from tui.render.styles import DIM, WARN

LEGEND_DECISIONS = (
    ("approve", ("approve once", "once")),
    ("approve_session", ("subagent session", "subagent")),
    ("approve_session_both", ("both directions", "both")),
    ("approve_serving", ("whole session…", "session…")),
    ("deny", ("deny", "deny")),
    ("deny_reason", ("deny with reason…", "reason…")),
)
LEGEND_BATCH = (
    ("mark", ("mark", "mark")),
    ("mark_all", ("mark all shown", "all")),
    ("batch('approve')", ("approve marked…", "approve…")),
    ("batch('deny')", ("deny marked…", "deny…")),
    ("filter", ("filter", "filter")),
)

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
    """Two lines of keys: the decisions (what the selected ask allows) and the batch keys; the long
    words when they fit in `width`, else the short ones. `armed`: the action of an armed first press."""
    grants = HumanAuthorizer.serving_grants_of(ask) if ask is not None else ()
    has_grants = bool(grants)
    possible = {"approve_session": has_grants,
                "approve_session_both": proven_direction(grants) is not None,
                "approve_serving": has_grants and ask is not None and ask.has_facts}
    first = Content("")
    for wording in (0, 1):
        parts: list[tuple[str, str]] = []
        for action, words in LEGEND_DECISIONS:
            if action == "approve_session_both" and not possible[action]:
                continue  # offered only when it is a different width, as in pi
            usable = ask is not None and possible.get(action, True) and not grace
            key_style = "reverse bold" if usable else "reverse dim"
            if armed == action:
                key_style = "reverse bold $text-warning"
            parts.append((f" {labels[action]} ", key_style))
            parts.append((f" {words[wording]}  ", "" if usable else DIM))
        if ask is not None and grace:
            parts.append((("⏳ keys wait a moment (new ask shown)", "⏳ wait")[wording], WARN))
        elif ask is not None and (double_press or ask_has_hidden(ask)):
            parts.append((("press twice to commit", "twice")[wording], DIM))
        first = Content.assemble(*parts)
        if first.cell_length <= width:
            break
    batch = Content("")
    for wording in (0, 1):
        batch_parts: list[tuple[str, str]] = []
        for action, words in LEGEND_BATCH:
            usable = ask is not None and (marked > 0 or action.startswith(("mark", "filter")))
            batch_parts.append((f" {labels[action]} ", "reverse bold" if usable else "reverse dim"))
            batch_parts.append((f" {words[wording]}  ", "" if usable else DIM))
        if marked:
            batch_parts.append((f"{marked} marked", "bold $text-accent"))
        batch = Content.assemble(*batch_parts)
        if batch.cell_length <= width:
            break
    return Content("\n").join([first, batch])
