"""Past asks as a person reads them: the summary line, one row's facts and provenance, a rule's change.

Pure functions of history rows and suggestions; every string a child sent goes through
`tui.sanitize` (shown, never parsed as markup).
"""

from __future__ import annotations

import json
import time

from textual.content import Content

from core.history import HistoryRow, Summary
from core.history.rule_edit import RuleEdit, Target
from core.history.suggest import Suggestion
from core.rules.matcher import acts_as
from core.rules.width import how_wide
from tui.render.styles import DIM, WARN
from tui.sanitize import sanitize


def safe(text: str | None, style: str = "") -> Content:
    return sanitize(text or "", single_line=True).content(style)


def summary_content(summary: Summary) -> Content:
    """Asks per agent, share approved, median time a person took, withdrawn before an answer."""
    parts: list[Content] = [Content.styled(f"{summary.total:,} asks", "bold")]
    agents = [Content.assemble(safe(name), f" {count:,}") for name, count in summary.per_agent[:4]]
    if len(summary.per_agent) > 4:
        agents.append(Content(f"+{len(summary.per_agent) - 4} more"))
    if agents:
        parts.append(Content(", ").join(agents))
    share = summary.share_approved
    parts.append(Content("no verdicts" if share is None else f"{share:.0%} approved"))
    median = summary.median_person_ms
    parts.append(
        Content("no person decisions" if median is None else f"median person decision {wait_text(median)}")
    )
    parts.append(Content(f"{summary.withdrawn:,} withdrawn unanswered"))
    return Content(" · ").join(parts)


def detail_content(row: HistoryRow) -> Content:
    """Facts (as the child sent them) and provenance (who decided, when, what was written)."""
    lines: list[Content] = []

    def field(label: str, value: object, style: str = "") -> None:
        if value is None or value == "":
            return
        text = value if isinstance(value, str) else str(value)
        lines.append(Content.assemble((f"{label:<18}", "dim"), safe(text, style)))

    def block(label: str, text: str) -> None:
        lines.append(Content.styled(label, "bold"))
        lines.extend(sanitize(line).content() for line in text.splitlines())

    lines.append(Content.styled("The ask", "bold underline"))
    field("request", row.request_id or row.request_name)
    field("agent", row.agent, "bold")
    mismatch = row.agent_mismatch()
    if mismatch is not None:
        field("requester agent", row.requester_agent())
        lines.append(Content.styled(f"⚠ {mismatch}", "bold $text-warning"))
    field("surface", row.surface)
    field("value", row.value, "bold")
    field("message", row.message)
    field("from session", row.requester_session)
    field("served session", row.served_session)
    field("child created", stamp(row.created_at / 1000 if row.created_at else None))
    facts = row.facts_json()
    if facts:
        block("facts (as sent)", json.dumps(facts, indent=2, ensure_ascii=False))
    lines.append(Content(""))
    lines.append(Content.styled("Provenance", "bold underline"))
    field("outcome", row.outcome, "bold")
    field("verdict", row.verdict, "bold")
    field("decided by", row.decider)
    field("reason", row.reason)
    field("responder", row.responder_session)
    field("arrived", stamp(row.arrived_at))
    field("shown", stamp(row.shown_at))
    field("decided", stamp(row.decided_at))
    field("time to decide", wait_text(row.decide_ms) if row.decide_ms is not None else None)
    field("response written", {None: None, 0: "no (one already existed)", 1: "yes"}.get(row.written))
    field("source", row.source)
    decided_by = row.decided_by_json()
    if decided_by is not None:
        block("decidedBy", json.dumps(decided_by, indent=2, ensure_ascii=False))
    if row.response is not None:
        block("response (as written)", row.response.decode("utf-8", "backslashreplace"))
    if row.raw is not None:
        block(f"request bytes ({len(row.raw):,})", row.raw.decode("utf-8", "backslashreplace"))
    return Content("\n").join(lines)


def offer_content(offer: Suggestion, home: str | None = None) -> Content:
    """One suggested rule in the review's list: the pattern as written and, when it differs, as it
    acts; whose it is (the child's, when the child sent it); how often the person approved it."""
    acting = acts_as(offer.pattern, offer.surface, home) if home is not None else None
    parts: list[Content] = [Content.styled("allow ", "bold $text-success"), safe(offer.surface, "bold"),
                            Content(" "), safe(offer.pattern, "bold")]
    if acting is not None:
        parts += [Content.styled("  ⚠ acts as ", WARN), safe(acting, "bold")]
    wide = how_wide(offer.surface, offer.pattern, home) if home is not None else None
    if wide is not None:
        parts.append(Content.styled(f"  ⚠ WIDE: {wide}", "bold reverse $warning"))
    if offer.from_child:
        parts.append(Content.styled("  ⚠ the child's pattern", WARN))
    parts += [Content.styled(f"  approved {offer.approvals}× by you, e.g. ", "dim"),
              safe(offer.examples[0] if offer.examples else "")]
    return Content.assemble(*parts)


def change_content(change: RuleEdit, target: Target, home: str | None = None,
                   decides: Content | None = None) -> Content:
    """The confirm step: the exact rule JSON, its reach, the pending asks it `decides` at once, the
    file it goes to, and the diff of that file."""
    offer = change.suggestion
    rule = json.dumps(offer.rule_json(), indent=2, ensure_ascii=False)
    lines: list[Content] = [
        Content.styled("Add this rule?", "bold"),
        *(sanitize(line).content() for line in rule.splitlines()),
    ]
    if offer.from_child:
        lines.append(Content.assemble(("⚠ the child's pattern (its session suggestion on ", WARN),
                                      safe(offer.surface, "bold"), ("), not written by you", WARN)))
    acting = acts_as(offer.pattern, offer.surface, home) if home is not None else None
    if acting is not None:
        lines.append(Content.assemble(("⚠ acts as: ", WARN), safe(acting, "bold"),
                                      ("  (home expanded, .. resolved)", DIM)))
    wide = how_wide(offer.surface, offer.pattern, home) if home is not None else None
    if wide is not None:  # issue 34 finding 4: how wide, said out loud
        lines.append(Content.styled(f"⚠ WIDE: this rule {wide}", "bold reverse $warning"))
    reach = ("every agent this node serves (the --rules file applies after every agent file); "
             "pi itself does not read this file"
             if target.kind == "authorizer" else
             "every agent this node serves (agent files may override it), and pi itself when it "
             "reads this file")
    lines += [
        Content.assemble(("reach: ", "dim"), (reach, "")),
        *([Content(""), decides] if decides is not None else []),
        Content(""),
        Content.assemble(("to ", "dim"), (target.label, "bold"), ("  ", ""), safe(str(target.path))),
        Content(""),
    ]
    for line in change.diff.splitlines():
        style = "$text-success" if line.startswith("+") else "$text-error" if line.startswith("-") else "dim"
        lines.append(sanitize(line).content(style))
    return Content("\n").join(lines)


def stamp(at: float | None) -> str | None:
    return None if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def wait_text(ms: float) -> str:
    """A time to decide, always in seconds (as `pi-authorizer history` writes it)."""
    return f"{ms / 1000:.3f}s" if ms < 10_000 else f"{ms / 1000:.0f}s"
