"""The judgment stage and escalation's first step: each returns a decision, or `None` to go on.

Seams: this node's recorded authority (`Judge`), the chain after it (`Chain`), and a node with no
rules. The rules themselves are `core.judging.recorded.RecordedAuthority`; links are `core.judging.links`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from core.clock import Clock
from core.rules.compiled import Decided
from core.serving.verdicts import gate_denial
from core.vocabulary.asks import Decision, Judgment
from core.wire.decisions import DecisionSource, RuleDecision
from core.wire.limits import over_limit
from core.wire.request import ParsedRequest
from core.wire.response import ForwardedResponse, approve, deny

log = logging.getLogger("pi_authorizer.serve")

NO_FACTS_EXPLANATION = (
    "This request carries no child-fixed facts (no usable accessIntent, as from every 20.7.3 child), "
    "so this node's rules cannot judge it: it comes to you."
)


class Judge(Protocol):
    """Recorded authority: this node's own rules, on the child's facts, scoped to its agent."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment: ...


class Chain(Protocol):
    """Non-terminal judges after the rules; `None` means every link deferred."""

    async def review(self, parsed: ParsedRequest) -> Judgment | None: ...


class NoRecordedAuthority:
    """A node with no rules: everything with facts asks by default, everything without floors to ask."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        if parsed.access_intent is None:
            return Judgment(verdict="ask", explanation=(NO_FACTS_EXPLANATION,))
        return Judgment(verdict="ask", explanation=("No rules are loaded on this node: default ask.",))


def judge_ask(
    judge: Judge, parsed: ParsedRequest, responder: str, clock: Clock
) -> tuple[Judgment, Decision | None]:
    """The judgment: an ask over the per-request limits is refused before any rule sees it (bounded
    work; the agent is told which limit), else this node's rules decide; `None`: nobody decided.
    The asks a rule decides alike within one millisecond share one `Decision` value (`rule_decision`)."""
    limit = over_limit(parsed.request.access_intent)
    if limit is not None:
        judgment = Judgment(verdict="deny", explanation=(f"over the per-request limit: {limit}",))
        denial = gate_denial(responder, clock, f"the ask is too large: {limit}")
        return judgment, Decision(denial, "over-limit")
    judgment = judge.judge(parsed, responder)
    if judgment.verdict == "ask":
        return judgment, None
    return judgment, rule_decision(judgment, responder, clock)


def decide_ask(
    judge: Judge, verdict_of: VerdictOf | None, parsed: ParsedRequest, responder: str, clock: Clock
) -> Decision | Judgment:
    """`judge_ask`'s decision, else its judgment (nobody decided), for a caller that drops the
    judgment of an ask decided (the at-once lane): with the judge's `verdict_of` (this node's
    `RecordedAuthority.verdict_of`), a new ask a rule decides makes no `Judgment`. The same decision
    either way (`tests/judging/test_verdict_of.py`)."""
    if verdict_of is None or over_limit(parsed.request.access_intent) is not None:
        judgment, decision = judge_ask(judge, parsed, responder, clock)
        return judgment if decision is None else decision
    judged = verdict_of(parsed, responder)
    if isinstance(judged, Judgment):
        if judged.verdict == "ask":
            return judged
        return verdict_decision(judged.verdict, judged.decided_by, judged.reason, responder, clock)
    return verdict_decision(judged.verdict, judged.decision, judged.reason, responder, clock)


VerdictOf = Callable[[ParsedRequest, str], "Judgment | Decided"]
"""`RecordedAuthority.verdict_of`: a judgment, or a rule's verdict alone (`Decided`)."""


async def review_by_chain(
    chain: Chain, parsed: ParsedRequest, responder: str, clock: Clock, label: str
) -> tuple[Judgment, Decision] | None:
    """Escalation's first step: the chain's links in order; `None` when every link deferred (a link
    that fails counts as defer)."""
    try:
        verdict = await chain.review(parsed)
    except Exception:
        log.error("%s: the chain failed; it counts as defer", label, exc_info=True)
        return None
    if verdict is None:
        return None
    return verdict, rule_decision(verdict, responder, clock, "chain")


def rule_response(judgment: Judgment, responder: str, clock: Clock) -> ForwardedResponse:
    """The response for a rule's (or a link's) allow or deny, with its `decidedBy` and reason.

    A deny always carries a reason: without one, 20.7.3 tells its agent "User denied …" though no
    person decided (the reference's own rule denials leave it out; this node does not)."""
    return rule_decision(judgment, responder, clock).response


def rule_decision(judgment: Judgment, responder: str, clock: Clock, outcome: str = "rule") -> Decision:
    """`Decision(rule_response(judgment, responder, clock), outcome)`.

    A response is a value of the verdict, `decidedBy`, reason, responder and millisecond alone, and
    building one (and its decision) costs more than a kept judgment: the asks of a burst decided
    alike within the same millisecond share the last decision built (asks decided by one rule share
    its `decidedBy` value, `core.rules.judge.decision_of`). Callable from any thread without a lock:
    the last one is one tuple, read and replaced whole (a thread that finds another's is given an
    identical value; a race only builds one more)."""
    return verdict_decision(judgment.verdict, judgment.decided_by, judgment.reason, responder, clock, outcome)


def verdict_decision(verdict: str, source: DecisionSource | None, reason: str | None, responder: str,
                     clock: Clock, outcome: str = "rule") -> Decision:
    """`rule_decision` of a judgment of this verdict, `decidedBy` and reason."""
    now = int(clock.wall() * 1000)  # `wall_ms`, in place: every ask decided at once
    last = _last[0]
    if (last is not None and last[1] is source and last[4] == now and last[3] == responder
            and last[0] == verdict and last[2] == reason and last[5] == outcome):
        return last[6]
    if verdict == "allow":
        response = approve(responder=responder, at_ms=now, decided_by=source)
    else:
        text = reason if reason and reason.strip() else unreasoned(source)
        response = deny(responder=responder, at_ms=now, decided_by=source, reason=text)
    decision = Decision(response, outcome)
    _last[0] = (verdict, source, reason, responder, now, outcome, decision)
    return decision


#: The last decision `rule_decision` built, with what it was built from.
_last: list[tuple[str, DecisionSource | None, str | None, str, int, str, Decision] | None] = [None]


def unreasoned_denial(judgment: Judgment) -> str:
    """What the agent reads for a deny that has no reason of its own: who denied, by which rule."""
    return unreasoned(judgment.decided_by)


def unreasoned(source: DecisionSource | None) -> str:
    """`unreasoned_denial` of a judgment decided by `source`."""
    if isinstance(source, RuleDecision):
        pattern = "" if source.pattern is None else f" {source.pattern!r}"
        return f"pi-authorizer denied this by its {source.surface}{pattern} rule (no reason was configured)"
    return "pi-authorizer denied this by its rules (no reason was configured)"
