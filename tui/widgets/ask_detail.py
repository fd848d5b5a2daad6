"""The selected ask in full: banners, child-fixed facts, provenance, the grant, the child's text."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from core.asks import Ask, AskKey
from core.risk import RiskHint
from tui.widgets.ask_view import (
    DIM,
    VALUE_LIMIT,
    Clip,
    age_seconds,
    agent_content,
    agent_warning,
    ask_has_hidden,
    ask_risk,
    display_content,
    duration,
    facts_content,
    grants_content,
    provenance_content,
    value_content,
)
from tui.widgets.change_view import FileChange, change_from_evidence, change_renderable
from tui.widgets.painted import PaintProbe

NO_FACTS_BANNER = (
    "⚠ NO CHILD-FIXED FACTS (no usable accessIntent, e.g. a 20.7.3 child): it could not be matched against "
    "this node's rules. Only the child's own display text below describes it."
)
HIDDEN_BANNER = (
    "⚠ CONTAINS HIDDEN CHARACTERS, shown as ␛ / ⟨U+…⟩ tokens. Every decision key needs a second press."
)


def ask_change(ask: Ask) -> FileChange | None:
    """The write's or edit's content when the child's payload carries it (see `change_view`)."""
    payload = ask.request.payload
    if payload is None:
        return None
    return change_from_evidence(payload.request.value, payload.evidence)


def risk_content(hints: tuple[RiskHint, ...]) -> Content:
    """The risk badge: labelled a hint, because it never decides anything."""
    parts = [Content.styled(f" {h.label} ", "reverse bold") + Content(" ") + value_content(h.why, Clip(120))
             for h in hints]
    return Content.assemble(("Hint, not a decision: ", "bold"), Content("  ·  ").join(parts))


def header_content(ask: Ask, now: float, position: int, total: int) -> Content:
    return Content.assemble(
        (f"Ask {position}/{total}", "bold"),
        ("  from ", DIM),
        agent_content(ask.request.requester_agent_name, short=True),
        ("  ·  waiting ", DIM),
        (duration(age_seconds(ask, now)), ""),
        ("  ·  child gives up in ", DIM),
        (duration(ask.seconds_left(now)), "bold"),
    )


class AskDetail(VerticalScroll):
    """Read-only panels; nothing here is clickable (child text is literal `Content`)."""

    can_focus = False
    shown: AskKey | None = None

    def compose(self) -> ComposeResult:
        yield PaintProbe(id="detail-header", markup=False)
        yield Static(id="banner-hidden", classes="banner -warning", markup=False)
        yield Static(id="banner-nofacts", classes="banner -warning", markup=False)
        yield Static(id="banner-agent", classes="banner -error", markup=False)
        yield Static(id="banner-risk", classes="banner -warning", markup=False)
        yield Static(id="facts", classes="panel", markup=False)
        yield Static(id="display", classes="panel", markup=False)
        yield Static(id="change", classes="panel", markup=False)
        yield Static(id="grants", classes="panel", markup=False)
        yield Static(id="provenance", classes="panel", markup=False)

    def on_mount(self) -> None:
        self.query_one("#facts", Static).border_title = "Facts — fixed by the child"
        self.query_one("#provenance", Static).border_title = "Why this node asks — provenance"
        self.query_one("#grants", Static).border_title = "Session grant it would record (surface pattern)"
        self.query_one("#display", Static).border_title = "Child's rendering — display only, not facts"
        self.query_one("#change", Static).border_title = "The change — from the child's payload, display only"
        self.show(None, 0.0, 0, 0)

    def show(self, ask: Ask | None, now: float, position: int, total: int) -> bool:
        """Render `ask` (or the empty state); True when a value was shortened.

        Another ask opens at the top: reading must never start in the middle of its facts.
        """
        key = None if ask is None else ask.key
        if key != self.shown:
            self.shown = key
            self.scroll_home(animate=False, immediate=True)
        header = self.query_one("#detail-header", Static)
        names = ("facts", "provenance", "grants", "display", "change")
        panels = [self.query_one(f"#{n}", Static) for n in names]
        banners = {n: self.query_one(f"#banner-{n}", Static) for n in ("hidden", "nofacts", "agent", "risk")}
        if ask is None:
            header.update(Content.styled("No pending asks. Children's asks appear here as they arrive.", DIM))
            for widget in (*panels, *banners.values()):
                widget.display = False
            return False
        clip = Clip(VALUE_LIMIT)
        header.update(header_content(ask, now, position, total))
        banners["hidden"].display = ask_has_hidden(ask)
        banners["hidden"].update(HIDDEN_BANNER)
        banners["nofacts"].display = not ask.has_facts
        banners["nofacts"].update(NO_FACTS_BANNER)
        warning = agent_warning(ask.request.requester_agent_name)
        banners["agent"].display = warning is not None
        if warning is not None:
            banners["agent"].update(
                Content.assemble(
                    ("⚠ SUSPICIOUS AGENT NAME ", "bold"),
                    value_content(ask.request.requester_agent_name, Clip(80)),
                    (f": {warning}. The name is reported by the child and unauthenticated.", ""),
                )
            )
        hints = ask_risk(ask)
        banners["risk"].display = bool(hints)
        if hints:
            banners["risk"].update(risk_content(hints))
        builders = (facts_content, display_content, grants_content, provenance_content)
        order = ("facts", "display", "grants", "provenance")
        for name, build in zip(order, builders, strict=True):
            widget = self.query_one(f"#{name}", Static)
            widget.display = True
            widget.update(build(ask, clip))
        change = ask_change(ask)
        change_panel = self.query_one("#change", Static)
        change_panel.display = change is not None
        if change is not None:
            change_panel.update(change_renderable(change))
        return clip.clipped > 0

    def expect_paint(self, token: Hashable, callback: Callable[[Hashable], object]) -> None:
        """`callback(token)` once a frame showing this ask's header has been painted."""
        self.query_one("#detail-header", PaintProbe).expect(token, callback)

    def update_header(self, ask: Ask | None, now: float, position: int, total: int) -> None:
        if ask is not None:
            self.query_one("#detail-header", Static).update(header_content(ask, now, position, total))
