"""The selected ask in full: banners, child-fixed facts, provenance, the grant, the child's text."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from core.judging.model_judge import JudgeReview
from core.rules.agent_names import suspicious_agent_reason
from core.vocabulary.asks import Ask, AskKey
from tui.render.ask import (
    Clip,
    display_content,
    facts_content,
    grants_content,
    origin_content,
    provenance_content,
    value_content,
)
from tui.render.ask_facts import VALUE_LIMIT, ask_has_hidden, ask_risk
from tui.render.change import FileChange, change_from_evidence, change_renderable
from tui.render.judge_advice import advice_content
from tui.render.lines import header_content, risk_content
from tui.render.styles import DIM, WARN
from tui.widgets.painted import PaintProbe

NO_FACTS_BANNER = (
    "⚠ NO CHILD-FIXED FACTS (no usable accessIntent, e.g. a pi 20.7.3 child): it could not be matched "
    "against this node's rules, so rules, w, R and explain cannot decide it: it is yours (y, s with the "
    "child's own suggestion, n, r). Only the child's own display text below describes it."
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


HIDDEN_CONTENT = Content(HIDDEN_BANNER)
NOFACTS_CONTENT = Content(NO_FACTS_BANNER)
PANELS = (
    ("facts", facts_content),
    ("display", display_content),
    ("grants", grants_content),
    ("provenance", provenance_content),
)


class AskDetail(VerticalScroll):
    """Read-only panels; nothing here is clickable (child text is literal `Content`).

    Moving through a long queue re-renders only what changed: the panels of an ask are built once
    and kept (a small cache by ask key), and a panel whose content is the same is not updated, so
    the layout is not recomputed for it.
    """

    can_focus = False
    CACHE = 64

    def __init__(self, *, id: str | None = None, serving: Callable[[], Content] | None = None,
                 advice: Callable[[Ask], JudgeReview | None] | None = None) -> None:
        """`serving`: what the empty queue says it serves (session, root, the child's env line);
        `advice`: the model judge's review of an ask, when it has one."""
        super().__init__(id=id)
        self.serving = serving
        self.advice = advice
        # Keyed by name, but only ever the very ask built (another ask under the same name is built anew).
        self._built: dict[AskKey, tuple[Ask, dict[str, Content | Text], bool]] = {}
        self._shown: dict[str, Content | Text | bool] = {}
        self._ask: AskKey | None = None
        self._ask_object: Ask | None = None

    def compose(self) -> ComposeResult:
        yield PaintProbe(id="detail-header", markup=False)
        yield Static(id="banner-hidden", classes="banner -warning", markup=False)
        yield Static(id="banner-nofacts", classes="banner -warning", markup=False)
        yield Static(id="banner-agent", classes="banner -error", markup=False)
        yield Static(id="banner-risk", classes="banner -warning", markup=False)
        yield Static(id="judge", classes="banner -warning", markup=False)  # the model judge's advice
        yield Static(id="facts", classes="panel", markup=False)
        yield Static(id="origin", classes="panel", markup=False)  # a carried ask's hops
        yield Static(id="change", classes="panel", markup=False)  # the diff before the raw text
        yield Static(id="display", classes="panel", markup=False)
        yield Static(id="serving", classes="panel", markup=False)
        yield Static(id="grants", classes="panel", markup=False)
        yield Static(id="provenance", classes="panel", markup=False)

    def on_mount(self) -> None:
        self.query_one("#facts", Static).border_title = "Facts — fixed by the child"
        self.query_one("#provenance", Static).border_title = "Why this node asks"
        self.query_one("#origin", Static).border_title = "Where it came from — provenance, never judged"
        self.query_one("#grants", Static).border_title = "Session grant it would record (surface pattern)"
        self.query_one("#display", Static).border_title = "Child's rendering — display only, not facts"
        self.query_one("#change", Static).border_title = "The change — from the child's payload, display only"
        self.query_one("#serving", Static).border_title = "Waiting for asks"
        self.query_one("#banner-hidden", Static).update(HIDDEN_BANNER)
        self.query_one("#banner-nofacts", Static).update(NO_FACTS_BANNER)
        self.show(None, 0.0, 0, 0)

    def set_compact(self, compact: bool) -> None:
        """On a small terminal the grant `s` / `w` would record comes before the facts, so it is on
        screen without scrolling (it is a few lines; the facts can fill the detail)."""
        grants = self.query_one("#grants", Static)
        if compact:
            self.move_child(grants, before=self.query_one("#facts", Static))
        else:
            self.move_child(grants, after=self.query_one("#display", Static))

    def _set(self, name: str, content: Content | Text | None) -> None:
        """Show `content` in panel `name` (None hides it); nothing happens when it is already shown."""
        widget = self.query_one(f"#{name}", Static)
        if content is None:
            if self._shown.get(name) is not False:
                widget.display = False
                self._shown[name] = False
            return
        shown = self._shown.get(name)
        if shown is False or shown is None:
            widget.display = True
            widget.update(content)
        elif shown != content:
            self._update_in_place(widget, content)
        self._shown[name] = content

    def _update_in_place(self, widget: Static, content: Content | Text) -> None:
        """Lay the detail out again only when the panel's height changes: moving between asks of the
        same shape (most of a long queue) then repaints the panels and nothing else."""
        width, before = widget.content_size
        widget.update(content, layout=False)
        if not width or widget.get_content_height(self.size, self.app.size, width) != before:
            widget.refresh(layout=True)

    def _build(self, ask: Ask) -> tuple[dict[str, Content | Text], bool]:
        held = self._built.pop(ask.key, None)
        cached = held[1:] if held is not None and held[0] is ask else None
        if cached is None:
            clip = Clip(VALUE_LIMIT)
            panels: dict[str, Content | Text] = {name: build(ask, clip) for name, build in PANELS}
            origin = origin_content(ask, clip)
            if origin is not None:
                panels["origin"] = origin
            change = ask_change(ask)
            if change is not None:
                panels["change"] = change_renderable(change)
            warning = suspicious_agent_reason(ask.request.requester_agent_name)
            if warning is not None:
                panels["banner-agent"] = Content.assemble(
                    ("⚠ SUSPICIOUS AGENT NAME ", "bold"),
                    value_content(ask.request.requester_agent_name, Clip(80)),
                    (f": {warning}. The name is reported by the child and unauthenticated.", ""),
                )
            hints = ask_risk(ask)
            if hints:
                panels["banner-risk"] = risk_content(hints)
            review = self.advice(ask) if self.advice is not None else None
            if review is not None:
                panels["judge"] = advice_content(review)
            cached = (panels, clip.clipped > 0)
            while len(self._built) >= self.CACHE:
                self._built.pop(next(iter(self._built)))
        self._built[ask.key] = (ask, *cached)
        return cached

    def show(self, ask: Ask | None, now: float, position: int, total: int, *, hidden: int = 0) -> bool:
        """Render `ask` (or the empty state); True when a value was shortened. `hidden`: asks pending
        that the filter hides (none shown is then not "no pending asks")."""
        header = self.query_one("#detail-header", Static)
        if ask is None:
            self._ask = self._ask_object = None
            header.update(Content.styled(
                f"{hidden} pending, none match the filter (esc clears it)." if hidden else
                "No pending asks. Children's asks appear here as they arrive.", WARN if hidden else DIM))
            for name in ("banner-hidden", "banner-nofacts", "banner-agent", "banner-risk", "judge",
                         *(n for n, _ in PANELS), "change", "origin"):
                self._set(name, None)
            self._set("serving", self.serving() if self.serving is not None and not hidden else None)
            return False
        self._set("serving", None)
        if ask.key != self._ask or ask is not self._ask_object:
            self._ask, self._ask_object = ask.key, ask
            # another ask: read it from the top, never from the middle of its facts
            self.scroll_home(animate=False, immediate=True)
        panels, clipped = self._build(ask)
        header.update(header_content(ask, now, position, total), layout=False)
        self._set("banner-hidden", HIDDEN_CONTENT if ask_has_hidden(ask) else None)
        self._set("banner-nofacts", NOFACTS_CONTENT if not ask.has_facts else None)
        self._set("banner-agent", panels.get("banner-agent"))
        self._set("banner-risk", panels.get("banner-risk"))
        self._set("judge", panels.get("judge"))
        for name, _ in PANELS:
            self._set(name, panels[name])
        self._set("change", panels.get("change"))
        self._set("origin", panels.get("origin"))
        return clipped

    def expect_paint(self, token: Hashable, callback: Callable[[Hashable], object]) -> None:
        """`callback(token)` once a frame showing this ask's header has been painted."""
        self.query_one("#detail-header", PaintProbe).expect(token, callback)

    def update_header(self, ask: Ask | None, now: float, position: int, total: int) -> None:
        if ask is not None:
            self.query_one("#detail-header", Static).update(header_content(ask, now, position, total),
                                                            layout=False)
