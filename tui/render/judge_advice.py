"""The model judge, rendered: its advice on one ask (what it would do, the answers that led there, its
reason as untrusted literal text) and its measures against the person, per surface (for the app's
judge view and `history judge`). Pure: no app needed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.content import Content

from core.judging.judge_questions import QUESTION_NAMES
from core.judging.judge_record import SurfaceMeasure
from core.judging.model_judge import JudgeReview
from tui.render.ask import Clip, value_content
from tui.render.styles import DIM, ERROR, LABEL_STYLE, WARN
from tui.sanitize import safe_plain

#: What the first line says, by what became of the review.
HEADLINES = {
    "to_person": "⚖ THE JUDGE WOULD DENY — it decides nothing while you are here: you decide",
    "advice": "⚖ The judge advises (it decides nothing)",
    "capped": "⚖ The judge would allow; not allowed here",
    "deferred": "⚖ The judge had no verdict",
    "failed": "⚖ The judge could not answer: this ask came straight to you",
    "unavailable": "⚖ The judge is unavailable: this ask came straight to you",
    "decided": "⚖ The judge decided",
}


def answers_line(answers: dict[str, Any] | None) -> str:
    """`reads_secrets yes 0.95 · is_read_only no 0.90 …`, in the order the questions are asked."""
    if not answers:
        return ""
    parts = []
    for name in QUESTION_NAMES:
        answer = answers.get(name)
        if isinstance(answer, dict):
            said = "yes" if answer.get("value") else "no"
            parts.append(f"{name} {said} {float(answer.get('confidence', 0)):.2f}")
    return " · ".join(parts)


def advice_content(review: JudgeReview) -> Content:
    """The judge's panel on an ask: its recommendation and why (this node's words), the answers, then
    the model's reason as the literal untrusted text it is."""
    headline = HEADLINES.get(review.routed, "⚖ The judge")
    style = ERROR if review.recommendation == "deny" else WARN if review.failure else LABEL_STYLE
    parts: list[Content | tuple[str, str]] = [(headline, style), ("\n", "")]
    if review.recommendation == "deny":
        parts += [("the judge would deny: ", ERROR), value_content(review.model_reason or "(no reason given)",
                                                                    Clip(600)), ("\n", "")]
    else:
        parts += [(f"recommendation: {review.recommendation}", "bold"), ("\n", "")]
        if review.model_reason:
            reason = value_content(review.model_reason, Clip(600))
            parts += [("its reason (untrusted): ", DIM), reason, ("\n", "")]
    parts.append((f"by this node's table: {safe_plain(review.why, 400)}", DIM))
    line = answers_line(review.answers)
    if line:
        parts += [("\n", ""), (f"answers: {line}", DIM)]
    if review.latency_ms is not None:
        parts += [("\n", ""), (f"in {review.latency_ms:.0f} ms", DIM)]
    return Content.assemble(*parts)


def measure_rows(measures: Sequence[SurfaceMeasure]) -> list[tuple[str, ...]]:
    """One row per surface: reviewed, failed, compared with you, agreement, the two disagreements,
    latency (median / p95)."""
    rows: list[tuple[str, ...]] = []
    for m in measures:
        agreement = "—" if m.agreement is None else f"{m.agreement:.0%} of {m.compared}"
        latency = m.latency()
        rows.append((safe_plain(m.surface, 40) or "(empty)", str(m.reviewed), str(m.failed), agreement,
                     str(len(m.allowed_you_denied)), str(len(m.denied_you_allowed)), str(m.deferred),
                     "—" if latency is None else f"{latency[0]:.0f} / {latency[1]:.0f} ms"))
    return rows


MEASURE_COLUMNS = ("SURFACE", "REVIEWED", "FAILED", "AGREED WITH YOU", "WOULD ALLOW YOUR DENIALS",
                   "WOULD DENY YOUR APPROVALS", "NO VERDICT", "LATENCY")


def disagreement_lines(measures: Sequence[SurfaceMeasure], limit: int = 20) -> list[str]:
    """The asks where the judge and the person differed, the dangerous kind first."""
    lines = []
    for m in measures:
        for case in m.allowed_you_denied[-limit:]:
            lines.append(f"would have ALLOWED what you denied: {safe_plain(m.surface, 40)} "
                         f"{safe_plain(case['value'], 120)}")
        for case in m.denied_you_allowed[-limit:]:
            lines.append(f"would have denied what you allowed: {safe_plain(m.surface, 40)} "
                         f"{safe_plain(case['value'], 120)}")
    return lines
