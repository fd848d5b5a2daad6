"""Recorded-authority judgment of child-fixed facts against this node's policy.

`docs/contract.md` § Facts and judgment and § Rules state the semantics followed here.

Path surfaces match the child's alias set as sent (no re-normalization, no home expansion); bash
matches the command as the reference reads it (comment lines stripped, trimmed: `values.py`),
skill the name, other surfaces their candidate values. A bare `path` /
`external_directory` ask folds over both directional members, most restrictive first. A child
floor clamps a rule `allow` (never a session grant) to `ask`, unless yolo keeps it. Asking units
are judged one by one as bash commands with their own floors, and the most restrictive wins.

Order of authority: a config `deny` > this node's session grant > a config `ask`. Session grants
come after every config rule (last match wins), so a grant that matches is checked once more
against the config alone: when the config denies, the deny stands. This holds at judgment time
whatever the grant-time refusal missed (its shadow check is a heuristic).

A judgment is made once; the trail (which re-runs the same decisions, recording them) is built
only when someone reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from core.facts import AskingUnit, IntentFacts
from core.rules import evaluate
from core.rules.model import PATH_SURFACES, Action, Rule, family_members, more_restrictive
from core.rules.pi_reading import beyond_bmp, facts_as_pi
from core.rules.policy import Policy
from core.rules.values import bash_match_value
from core.wire.decisions import RuleDecision, SessionApprovalDecision, decision_source_json

Step = dict[str, object]
RulesDecision = RuleDecision | SessionApprovalDecision
NO_FACTS_REASON = (
    "version-skew floor (ADR 0008 §4): the request carries no usable accessIntent, "
    "so recorded rules are not consulted and the ask goes to live authority"
)
# bash matches one command, skill one name; without a value pi matches "" (its input builder's
# default), every other surface "*".
_SINGLE_VALUE_SURFACES = frozenset({"bash", "skill"})


@dataclass(frozen=True, slots=True)
class Outcome:
    """One judged surface (or unit): the winning rule and what it makes of the ask."""

    surface: str
    rule: Rule
    value: str
    verdict: Action
    origin: str
    matched_pattern: str | None
    unit: str | None = None
    floor: str | None = None


@dataclass(frozen=True)
class Resolution:
    """The verdict plus everything the caller needs for `decidedBy`, a denial and the trail."""

    verdict: Action
    surface: str
    outcome: Outcome | None
    _trail: Callable[[], list[Step]] = field(repr=False, compare=False)

    @property
    def rule(self) -> Rule | None:
        """The rule that decided (None for the no-facts floor)."""
        return self.outcome.rule if self.outcome else None

    @property
    def deny_reason(self) -> str | None:
        """The deciding deny rule's reason, to relay as the response's `denialReason`."""
        return self.rule.reason if self.verdict == "deny" and self.rule else None

    @cached_property
    def decision(self) -> RulesDecision | None:
        """The response `decidedBy` for an auto-decision (the wire's own type); None for an ask."""
        return _decision(self.verdict, self.surface, self.outcome)

    def decided_by(self) -> dict[str, object] | None:
        """`decision` as plain JSON (explain --json, the trail)."""
        return None if self.decision is None else decision_source_json(self.decision)

    @cached_property
    def trail(self) -> list[Step]:
        """JSON-serialisable steps explaining the verdict (computed on first use)."""
        return self._trail()


def resolve_with_policy(
    policy: Policy, facts: IntentFacts, session_rules: Sequence[Rule] = ()
) -> Resolution:
    """Resolve `facts` against a composed policy (`PolicyStore.policy(agent)`) plus `session_rules`.

    When pi 20.7.3 would read the files or the facts differently (`core.rules.pi_reading`),
    both readings are judged and the more restrictive verdict is kept; on a tie pi's reading
    decides, so the winning rule is the one pi names.
    """
    ours = _resolve_reading(policy, facts, session_rules)
    pi_facts = facts_as_pi(facts)
    pi_policy = policy.pi_reading
    note = ("pi 20.7.3 reads these files or facts differently (docs/fidelity.md); "
            "the more restrictive verdict is kept, pi's on a tie")
    if pi_facts is None:
        note = ("a directional ask: the files as pi 20.7.3 reads them, judged with the family fold "
                "(docs/fidelity.md); the more restrictive verdict is kept, pi's on a tie")
        # A directional ask (only newer children make one): pi's reading of the files, judged
        # by the newer semantics, so a file pi reads otherwise still tightens the verdict.
        pi_facts, pi_policy = facts, policy.pi_directional
    if pi_policy is None or not (
        pi_facts != facts or beyond_bmp(facts) or policy.pi_differs_on(facts.surface)
        or (facts.asking_units and policy.pi_differs_on("bash"))
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
    outcome = _Judge(policy, session, None).judge(facts)

    def trail() -> list[Step]:
        steps: list[Step] = []
        _Judge(policy, session, steps).judge(facts)
        return steps

    resolution = Resolution(outcome.verdict, facts.surface, outcome, trail)
    return resolution


def explain_no_facts(surface: str | None = None) -> Resolution:
    """The verdict for a request without usable facts: always `ask`, never rules.

    `docs/contract.md` § Facts and judgment.
    """
    steps: list[Step] = [
        {"step": "no-facts", "reason": NO_FACTS_REASON},
        {"step": "verdict", "verdict": "ask", "decidedBy": None},
    ]
    return Resolution("ask", surface or "", None, lambda: list(steps))


class _Judge:
    """One judgment; with `steps` it also records the trail using the very same decisions."""

    def __init__(self, policy: Policy, session: tuple[Rule, ...], steps: list[Step] | None) -> None:
        self.policy = policy
        self.session = session
        self.steps = steps

    def judge(self, facts: IntentFacts) -> Outcome:
        if self.steps is not None:
            self.steps.append(_policy_step(self.policy, len(self.session)))
        if facts.asking_units:
            outcome = self._units(facts.asking_units)
        else:
            outcome = self._floored(self._surface(facts.surface, facts.match_values), facts.floor)
        if self.steps is not None:
            self.steps.append({"step": "verdict", "verdict": outcome.verdict,
                               "decidedBy": _decided_by_preview(facts.surface, outcome)})
        return outcome

    def _record(self, step: Step) -> None:
        """Keep a step (only cheap-to-build steps go through here unguarded)."""
        if self.steps is not None:
            self.steps.append(step)

    def _units(self, units: Sequence[AskingUnit]) -> Outcome:
        outcomes = [
            self._floored(self._surface("bash", (unit.command,), unit.command), unit.floor)
            for unit in units
        ]
        chosen = _most_restrictive(outcomes)
        self._record({"step": "asking-units", "units": [o.unit for o in outcomes],
                      "verdicts": [o.verdict for o in outcomes], "chosen": chosen.unit,
                      "verdict": chosen.verdict,
                      "note": "chain-level floor and matchValues are not consulted"})
        return chosen

    def _surface(self, surface: str, values: Sequence[str], unit: str | None = None) -> Outcome:
        members = family_members(surface) if self.policy.folds else (surface,)
        outcomes = [self._member(member, values, unit) for member in members]
        chosen = _most_restrictive(outcomes)
        if len(outcomes) > 1:
            self._record({"step": "family-fold", "surface": surface, "members": list(members),
                          "verdicts": [o.verdict for o in outcomes], "chosen": chosen.surface,
                          "verdict": chosen.verdict})
        return chosen

    def _member(self, surface: str, values: Sequence[str], unit: str | None) -> Outcome:
        candidates = self.policy.candidates(surface)
        if self.session:
            # Without the fold (pi 20.7.3's reading), a family ask still meets the grants this
            # node recorded on its members.
            names = (surface,) if self.policy.folds else (surface, *family_members(surface))
            candidates = candidates.with_tail(
                [r for r in self.session if any(r.surface_wildcard.matches(n) for n in names)])
        originals = tuple(values) or (("",) if surface in _SINGLE_VALUE_SURFACES else ("*",))
        if surface in PATH_SURFACES:
            evaluator = "any-value"
            matched = originals
        else:
            evaluator = "first-candidate"
            if surface in _SINGLE_VALUE_SURFACES:
                originals = originals[:1]
            matched = tuple(bash_match_value(v) for v in originals) if surface == "bash" else originals
        match = self._match(candidates, surface, matched, originals)
        if match.rule.layer == "session":
            config_only = self._match(self.policy.candidates(surface), surface, matched, originals)
            if config_only.rule.action == "deny":
                self._record({"step": "grant-overridden", "surface": surface, "unit": unit,
                              "grant": match.rule.pattern, "deny": config_only.rule.to_json(),
                              "value": config_only.value})
                match = config_only
        rule = match.rule
        pattern = rule.pattern if rule.layer in ("config", "session") else None
        outcome = Outcome(surface, rule, match.value, rule.action, rule.origin, pattern, unit)
        if self.steps is not None:
            self._record({"step": "evaluate", "surface": surface, "unit": unit,
                          "evaluator": evaluator, "values": list(originals),
                          "consulted": evaluate.consulted(candidates, matched, originals),
                          "winner": {**rule.to_json(), "value": match.value},
                          "verdict": rule.action})
        return outcome

    @staticmethod
    def _match(candidates: evaluate.Candidates, surface: str, matched: Sequence[str],
               originals: Sequence[str]) -> evaluate.Match:
        if surface in PATH_SURFACES:
            return evaluate.any_value(candidates, matched, originals)
        return evaluate.first_candidate(candidates, matched)

    def _floored(self, outcome: Outcome, floor: str | None) -> Outcome:
        if not floor:
            return outcome
        applies = outcome.verdict == "allow" and outcome.rule.layer != "session"
        result = outcome
        if applies:
            yolo = self.policy.settings.yolo_mode
            result = Outcome(outcome.surface, outcome.rule, outcome.value,
                             "allow" if yolo else "ask", "yolo" if yolo else outcome.origin,
                             floor, outcome.unit, floor)
        self._record({"step": "child-floor", "floor": floor, "unit": outcome.unit,
                      "applied": applies, "before": outcome.verdict, "after": result.verdict,
                      "yolo": self.policy.settings.yolo_mode})
        return result


def _most_restrictive(outcomes: Sequence[Outcome]) -> Outcome:
    chosen = outcomes[0]
    for outcome in outcomes[1:]:
        if more_restrictive(outcome.verdict, chosen.verdict):
            chosen = outcome
    return chosen


def _decision(verdict: Action, surface: str, outcome: Outcome | None) -> RulesDecision | None:
    if verdict == "ask" or outcome is None:
        return None
    if outcome.rule.layer == "session":
        return SessionApprovalDecision(surface=surface, pattern=outcome.rule.pattern)
    return RuleDecision(surface=surface, pattern=outcome.matched_pattern, origin=outcome.origin)


def _decided_by_preview(surface: str, outcome: Outcome) -> dict[str, object] | None:
    decision = _decision(outcome.verdict, surface, outcome)
    return None if decision is None else decision_source_json(decision)


def _policy_step(policy: Policy, session_rules: int) -> Step:
    return {
        "step": "policy",
        "agent": policy.agent_name,
        "suspiciousAgent": policy.suspicious_agent_reason,
        "failClosedScopes": list(policy.fail_closed_scopes),
        "yolo": policy.settings.yolo_mode,
        "configErrors": len(policy.errors),
        "sessionRules": session_rules,
        "sources": [s.path for s in policy.sources if s.exists],
    }
