"""How one ask reads to a person, as literal `Content` (no Textual import beyond `Content`).

Everything from the child is sanitised (`tui.sanitize`) and assembled from (text, style) parts, so
markup in a command, path or agent name is shown, never interpreted. Long values are shortened
with an explicit "enter to see all" note, never silently. Pure: `tests/tui/test_render.py` checks
them without an app.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from textual.content import Content

from core.person import Person
from core.rules.agent_names import suspicious_agent_reason
from core.rules.matcher import acts_as
from core.rules.width import how_wide
from core.vocabulary.asks import Ask
from core.wire.principal import agent_mismatch, principal_agent
from tui.render.ask_facts import LINE_LIMIT, broker_origin, carried_by
from tui.render.styles import DIM, ERROR, LABEL_STYLE, WARN
from tui.sanitize import elision, sanitize


@dataclass
class Clip:
    """Counts what was shortened so the panel can say "enter to see all"."""

    limit: int | None
    clipped: int = 0


def value_content(value: str | None, clip: Clip, style: str = "", *, note: bool = True) -> Content:
    """One child value, sanitised; newlines shown with ⏎ and kept; shortened only with a note
    (`note=False`: the short form, `…+N`, where there is no room for the sentence)."""
    if value is None:
        return Content.styled("null", DIM)
    if value == "":
        return Content.styled("(empty)", DIM)
    text = value
    cut: str | None = None
    if clip.limit is not None:
        lines = text.split("\n")
        if len(text) > clip.limit or len(lines) > LINE_LIMIT:
            shown = "\n".join(lines[:LINE_LIMIT])[: clip.limit]
            clip.clipped += 1
            hidden = len(text) - len(shown)
            cut = (f" … {hidden} more characters (enter: see all)" if note else elision(hidden))
            text = shown
    parts: list[Content] = []
    for index, line in enumerate(text.split("\n")):
        if index:
            parts.append(Content.styled("⏎\n", DIM))
        parts.append(sanitize(line).content(style))
    if cut is not None:
        parts.append(Content.styled(cut, WARN))
    return Content("").join(parts)


def _row(label: str, value: Content, width: int = 16) -> Content:
    return Content.assemble((f"{label:<{width}}", LABEL_STYLE), value)


def _lines(rows: Iterable[Content]) -> Content:
    return Content("\n").join(list(rows))


def facts_content(ask: Ask, clip: Clip) -> Content:
    req = ask.request
    intent = ask.parsed.access_intent
    rows: list[Content] = []
    if intent is not None:
        rows.append(_row("surface", value_content(intent.surface, clip, "bold")))
        if intent.match_values:
            for index, mv in enumerate(intent.match_values, 1):
                label = "matchValues" if index == 1 else ""
                rows.append(_row(label, Content.assemble((f"[{index}] ", DIM), value_content(mv, clip))))
        else:
            rows.append(_row("matchValues", Content.styled("(none)", DIM)))
        rows.append(_row("boundaryValue", value_content(intent.boundary_value, clip)))
        rows.append(_row("requesterCwd", value_content(intent.requester_cwd, clip)))
        rows.append(
            _row(
                "principal",
                Content.assemble(("sessionId ", DIM), value_content(intent.principal.session_id, clip)),
            )
        )
        rows.append(
            _row("", Content.assemble(("agentName ", DIM), value_content(intent.principal.agent_name, clip)))
        )
        if intent.floor is not None:
            rows.append(_row("floor", value_content(intent.floor, clip, WARN)))
        if intent.asking_units:
            for index, unit in enumerate(intent.asking_units, 1):
                unit_text = Content.assemble((f"{index}. ", DIM), value_content(unit.command, clip))
                if unit.floor is not None:
                    unit_text = Content.assemble(
                        unit_text, ("  floor ", DIM), value_content(unit.floor, clip, WARN)
                    )
                rows.append(_row("askingUnits" if index == 1 else "", unit_text))
    rows.append(_row("request id", value_content(req.id, clip)))
    rows.append(_row("target session", value_content(req.target_session_id, clip)))
    if intent is None or intent.principal.session_id != req.requester_session_id:
        rows.append(
            _row(
                "requester",
                Content.assemble(("sessionId ", DIM), value_content(req.requester_session_id, clip)),
            )
        )
    if intent is not None and intent.principal.session_id != req.requester_session_id:
        rows.append(Content.styled("principal.sessionId differs from requesterSessionId", WARN))
    mismatch = agent_mismatch(req.requester_agent_name, principal_agent(ask.parsed))
    if mismatch is not None:
        rows.append(_row("requester", Content.assemble(
            ("agentName ", DIM), value_content(req.requester_agent_name, clip))))
        rows.append(Content.styled(mismatch, WARN))
    return _lines(rows)


ORIGIN_LABEL = 17  # "courier session" and a space


def origin_content(ask: Ask, clip: Clip) -> Content | None:
    """Where a carried ask came from, by whom each part is known. A broker ask's courier host and
    session are checked against the subject the broker took it on (per-host credentials make that
    subject the courier's own); every other hop is its writer's claim: the parcel's, or the request
    file's, which a courier on this machine or the child itself may have written. Never "carried by"
    on a claim, never judged, sanitised. None for an ask that names no hop."""
    hops = carried_by(ask)
    if not hops:
        return None
    rows: list[Content] = []
    origin = broker_origin(ask)
    claimed = hops
    if origin is not None:
        rows.append(_row("via", Content.styled("the NATS broker (--broker)", "bold"), ORIGIN_LABEL))
        rows.append(_row("courier host", value_content(origin.host, clip, "bold"), ORIGIN_LABEL))
        rows.append(_row("courier session", value_content(origin.session_id, clip), ORIGIN_LABEL))
        rows.append(Content.styled("(checked against the subject the broker took it on: only that host's "
                                   "credentials publish there)", DIM))
        claimed = hops[:-1]
    if claimed:
        parts: list[Content] = []
        for index, hop in enumerate(claimed):
            if index:
                parts.append(Content.styled(" → ", DIM))
            parts.append(value_content(hop, clip))
        rows.append(_row("claimed hops", Content("").join(parts), ORIGIN_LABEL))
        writer = "the courier that published the parcel" if origin is not None else \
            "whoever wrote the request file: a courier on this machine, or the child itself"
        rows.append(Content.styled(f"(host/session/node, first the one that read it from its child: the "
                                   f"claim of {writer}; not verified, never judged)", WARN))
    return _lines(rows)


def provenance_content(ask: Ask, clip: Clip) -> Content:
    """Why the ask came to a person, in words first; then the rules' evaluation as a dimmed trace."""
    lines = ask.judgment.explanation
    rows: list[Content] = []
    if not lines:
        rows.append(Content.styled("(this node's rules gave no explanation)", DIM))
    for index, line in enumerate(lines):
        if index == 1:
            rows.append(Content.styled("How this node's rules were evaluated, step by step:", DIM))
        rows.append(value_content(line, clip, "" if index == 0 else DIM))
    for error in ask.judgment.config_errors:
        rows.append(Content.assemble(("config error: ", ERROR), value_content(error, clip)))
    if ask.judgment.trail:
        rows.append(Content.styled("(`pi-authorizer explain` on the request file prints the same)", DIM))
    return _lines(rows)


def grants_content(ask: Ask, clip: Clip) -> Content:
    grants = Person.serving_grants_of(ask)
    if not grants:
        return Content.styled("The child sent no session suggestion: only once / deny are possible.", DIM)
    rows: list[Content] = []
    home = str(Path.home())
    for grant in grants:
        rows.append(
            Content.assemble(
                value_content(grant.surface, clip, "bold"),
                ("  ", ""),
                ('"', DIM),
                value_content(grant.pattern, clip, "bold $text-accent"),
                ('"', DIM),
            )
        )
        acting = acts_as(grant.pattern, grant.surface, home)
        if acting is not None:  # issue 20 finding 6: as written, and as it acts
            rows.append(Content.assemble(("    ⚠ acts as ", WARN), ('"', DIM),
                                         value_content(acting, clip, "bold"), ('"', DIM)))
        wide = grant_width(ask, grant.surface, grant.pattern, home)
        if wide is not None:  # issue 34 finding 4: how wide, said out loud
            rows.append(Content.styled(f"    ⚠ WIDE: this {wide}", WIDE_STYLE))
    return _lines(rows)


#: How a wide pattern's warning is painted: bold reverse, so it cannot be missed at any size.
WIDE_STYLE = "bold reverse $warning"


def grant_width(ask: Ask, surface: str, pattern: str, home: str) -> str | None:
    """`core.rules.width.how_wide` for a pattern recorded or written from `ask` (its requester's cwd)."""
    intent = ask.parsed.access_intent
    return how_wide(surface, pattern, home, intent.requester_cwd if intent is not None else None)


def display_content(ask: Ask, clip: Clip) -> Content:
    req = ask.request
    rows: list[Content] = []
    payload = req.payload
    if payload is not None:
        p = payload.request
        rows.append(_row("kind", value_content(payload.kind, clip)))
        rows.append(_row("value", value_content(p.value, clip)))
        rows.append(_row("matchedPattern", value_content(p.matched_pattern, clip)))
        if p.tool_name is not None:
            rows.append(_row("tool", value_content(p.tool_name, clip)))
        if p.invoked_tool_name is not None:
            rows.append(_row("invoked as", value_content(p.invoked_tool_name, clip)))
        if p.command_context is not None:
            rows.append(_row("context", value_content(p.command_context, clip)))
        if p.executed_unit is not None:
            rows.append(_row("executedUnit", value_content(p.executed_unit, clip)))
        for ev in payload.evidence:
            line = Content.assemble(
                value_content(ev.label, clip, "bold"), (": ", DIM), value_content(ev.text, clip)
            )
            if ev.detail is not None:
                line = Content.assemble(line, (" — ", DIM), value_content(ev.detail, clip, DIM))
            rows.append(_row("evidence", line))
        for note in payload.annotations:
            rows.append(
                _row(
                    "annotation",
                    Content.assemble(
                        value_content(note.source, clip, "italic"),
                        (": ", DIM),
                        value_content(note.text, clip),
                        (" (model-generated advisory)", DIM),
                    ),
                )
            )
    elif req.message is not None:
        rows.append(value_content(req.message, clip))
    display = Content.assemble(
        ("display surface ", DIM),
        value_content(req.surface, clip),
        ("   value ", DIM),
        value_content(req.value, clip),
    )
    rows.append(display)
    if req.source is not None:
        rows.append(Content.assemble(("source ", DIM), value_content(req.source, clip)))
    for name, why in ask.parsed.dropped.items():
        rows.append(
            Content.assemble(
                ("ignored malformed field ", WARN), (name, "bold"), (": ", DIM), value_content(why, clip)
            )
        )
    return _lines(rows)


def agent_content(name: str, clip: Clip | None = None, *, short: bool = False, note: bool = True) -> Content:
    """The child-reported agent name, with a warning when it looks forged."""
    clip = clip or Clip(80)
    warning = suspicious_agent_reason(name)
    shown = value_content(name, clip, "bold", note=note)
    if warning is None:
        return shown if not note else Content.assemble(shown, (" (unauthenticated)", DIM))
    if short:
        return Content.assemble(shown, (" ⚠ suspicious", ERROR))
    return Content.assemble(shown, (f" ⚠ suspicious agent name: {warning}", ERROR))


def reach_content(asks: Sequence[Ask], decider: str, *, others: bool) -> Content:
    """The pending asks a step would decide at once, every one (the step's body scrolls): one list for
    `w`'s whole-session confirmation and `R`'s rule dialog, which then decide exactly these asks.
    `decider`: what each is recorded as decided by; `others`: the step's own ask is not in the list."""
    other = "other " if others else ""
    count = len(asks)
    if not count:
        return Content.styled(f"It decides no {other}pending ask now.", DIM)
    noun = f"1 {other}pending ask" if count == 1 else f"{count} {other}pending asks"
    also = "also " if others else ""
    lines = [Content.assemble((f"It {also}approves ", "bold"), (noun, "bold $text-warning"),
                              (f" now (each recorded as decided by {decider}):", "bold"))]
    for ask in asks:
        intent = ask.parsed.access_intent
        lines.append(Content.assemble(
            ("  • ", DIM), agent_content(ask.request.requester_agent_name, short=True), ("  ", ""),
            value_content(intent.match_values[0] if intent and intent.match_values else "", Clip(80))))
    lines.append(Content.styled("An ask that arrives after this was shown is not decided by it: it waits "
                                "for you.", DIM))
    return Content("\n").join(lines)
