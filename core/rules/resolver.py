"""Recorded-authority judgment of child-fixed facts against this node's policy.

`docs/design/contract.md` § Facts and judgment and § Rules state the semantics followed here.

The judgment of one reading is `core.rules.judge`; this module judges both readings when pi
20.7.3 would read the files or facts differently, and keeps the more restrictive verdict.

Order of authority: a config `deny` > this node's session grant > a config `ask`. Session grants
come after every config rule (last match wins), so a grant that matches is checked once more
against the config alone: when the config denies, the deny stands. This holds at judgment time
whatever the grant-time refusal missed (its shadow check is a heuristic).

A judgment is made once; the trail (which re-runs the same decisions, recording them) is built
only when someone reads it. Identical facts judged again under the same composed policy
(`resolve_with_policy`: `explain`, a preview) reuse the first judgment (`MAX_RESOLVED` kept; serving
keeps its own, the whole judgment of an ask: `core.judging.kept`): a policy is a value, replaced
whole when a file changes, and the judgment a pure function of it, the facts and the session rules,
so the reuse gives exactly what judging again gives (`tests/rules/test_resolved_cache.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from core.rules.judge import Outcome, PolicyJudge, RulesDecision, decision_of
from core.rules.model import Action, Rule, Step, more_restrictive
from core.rules.pi_reading import beyond_bmp, facts_as_pi
from core.rules.policy import Policy
from core.wire.decisions import decision_source_json
from core.wire.facts import IntentFacts

#: Judgments kept, over every policy (the oldest half dropped when full), and the largest facts
#: kept (in characters): memory stays bounded whatever the children send.
MAX_RESOLVED = 2048
MAX_RESOLVED_CHARS = 2048
_RESOLVED: dict[tuple[object, ...], tuple[Policy, tuple[Rule, ...], Resolution]] = {}
_RESOLVED_LOCK = threading.Lock()

NO_FACTS_REASON = (
    "version-skew floor (docs/design/contract.md § Facts and judgment): the request carries no usable "
    "accessIntent, so recorded rules are not consulted and the ask goes to live authority"
)


@dataclass(frozen=True)
class Resolution:
    """The verdict plus everything the caller needs for `decidedBy`, a denial and the trail."""

    verdict: Action
    surface: str
    outcome: Outcome | None
    trail_of: Callable[[], list[Step]] = field(repr=False, compare=False)

    @property
    def rule(self) -> Rule | None:
        """The rule that decided (None for the no-facts floor)."""
        return self.outcome.rule if self.outcome else None

    @property
    def deny_reason(self) -> str | None:
        """The deciding deny rule's reason, to relay as the response's `denialReason`."""
        return self.rule.reason if self.verdict == "deny" and self.rule else None

    @property
    def decision(self) -> RulesDecision | None:
        """The response `decidedBy` for an auto-decision (the wire's own type); None for an ask."""
        return decision_of(self.verdict, self.surface, self.outcome)

    def decided_by(self) -> dict[str, object] | None:
        """`decision` as plain JSON (explain --json, the trail)."""
        return None if self.decision is None else decision_source_json(self.decision)

    @cached_property
    def trail(self) -> list[Step]:
        """JSON-serialisable steps explaining the verdict (computed on first use)."""
        return self.trail_of()


def resolve_with_policy(
    policy: Policy, facts: IntentFacts, session_rules: Sequence[Rule] = ()
) -> Resolution:
    """Resolve `facts` against a composed policy (`PolicyStore.policy(agent)`) plus `session_rules`,
    reusing the judgment of identical facts under the very same policy and session rules."""
    session = tuple(session_rules)
    if _size(facts) > MAX_RESOLVED_CHARS:
        return resolve_uncached(policy, facts, session)
    key = (id(policy), facts, tuple(map(id, session)))
    kept = _RESOLVED.get(key)
    # The entry holds the policy and rules it was judged with: an id seen again is the same object.
    if kept is not None and kept[0] is policy and all(a is b for a, b in zip(kept[1], session, strict=True)):
        resolution = kept[2]
        # A value of its own, whose trail is built again on first read (as if judged again).
        return Resolution(resolution.verdict, resolution.surface, resolution.outcome, resolution.trail_of)
    resolution = resolve_uncached(policy, facts, session)
    with _RESOLVED_LOCK:
        if len(_RESOLVED) >= MAX_RESOLVED:
            for old in list(_RESOLVED)[: MAX_RESOLVED // 2]:
                del _RESOLVED[old]
        _RESOLVED[key] = (policy, session, resolution)
    return resolution


def _size(facts: IntentFacts) -> int:
    units = facts.asking_units or ()
    return (sum(map(len, facts.match_values)) + len(facts.match_values) + len(facts.boundary_value or "")
            + sum(len(u.command) + 1 for u in units) + len(facts.surface) + len(facts.floor or ""))


def resolve_uncached(
    policy: Policy, facts: IntentFacts, session_rules: Sequence[Rule] = ()
) -> Resolution:
    """Resolve `facts` against a composed policy plus `session_rules`, judged afresh.

    When pi 20.7.3 would read the files or the facts differently (`core.rules.pi_reading`),
    both readings are judged and the more restrictive verdict is kept; on a tie pi's reading
    decides, so the winning rule is the one pi names.
    """
    ours = _resolve_reading(policy, facts, session_rules)
    pi_facts = facts_as_pi(facts)
    pi_policy = policy.pi_reading
    note = ("pi 20.7.3 reads these files or facts differently (docs/design/fidelity.md); "
            "the more restrictive verdict is kept, pi's on a tie")
    if pi_facts is None:
        note = ("a directional ask: the files as pi 20.7.3 reads them, judged with the family fold "
                "(docs/design/fidelity.md); the more restrictive verdict is kept, pi's on a tie")
        # A directional ask (only newer children make one): pi's reading of the files, judged
        # by the newer semantics, so a file pi reads otherwise still tightens the verdict.
        pi_facts, pi_policy = facts, policy.pi_directional
    if pi_policy is None or not (
        (pi_facts is not facts and pi_facts != facts) or beyond_bmp(facts)
        or policy.pi_differs_on(facts.surface) or (facts.asking_units and policy.pi_differs_on("bash"))
    ):
        return ours
    pi = _resolve_reading(pi_policy, pi_facts, session_rules)
    if _deciding(pi) == _deciding(ours):
        return ours
    chosen = ours if more_restrictive(ours.verdict, pi.verdict) else pi
    step: Step = {
        "step": "pi-reading",
        "note": note,
        "ours": {"verdict": ours.verdict, "decidedBy": ours.decided_by()},
        "pi": {"verdict": pi.verdict, "decidedBy": pi.decided_by()},
        "kept": "ours" if chosen is ours else "pi",
    }

    def trail() -> list[Step]:
        steps = list(chosen.trail)
        return [*steps[:-1], step, *steps[-1:]]

    return Resolution(chosen.verdict, chosen.surface, chosen.outcome, trail)


def _deciding(resolution: Resolution) -> tuple[object, ...]:
    outcome = resolution.outcome
    return (resolution.verdict, outcome and outcome.matched_pattern, outcome and outcome.origin,
            outcome and outcome.rule.layer)


def _resolve_reading(
    policy: Policy, facts: IntentFacts, session_rules: Sequence[Rule] = ()
) -> Resolution:
    session = tuple(session_rules)
    outcome = PolicyJudge(policy, session, None).judge(facts)

    def trail() -> list[Step]:
        steps: list[Step] = []
        PolicyJudge(policy, session, steps).judge(facts)
        return steps

    resolution = Resolution(outcome.verdict, facts.surface, outcome, trail)
    return resolution


def explain_no_facts(surface: str | None = None) -> Resolution:
    """The verdict for a request without usable facts: always `ask`, never rules.

    `docs/design/contract.md` § Facts and judgment.
    """
    steps: list[Step] = [
        {"step": "no-facts", "reason": NO_FACTS_REASON},
        {"step": "verdict", "verdict": "ask", "decidedBy": None},
    ]
    return Resolution("ask", surface or "", None, lambda: list(steps))


