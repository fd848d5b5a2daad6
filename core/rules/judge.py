"""One judgment of child-fixed facts against one reading of a composed policy.

`core.rules.resolver` runs a `PolicyJudge` once per reading (ours, and pi 20.7.3's when it differs) and
keeps the more restrictive verdict; this module holds the judgment itself. A `PolicyJudge` made with a
step list records the trail from the very same decisions, so the explanation never disagrees with
the verdict.

Path surfaces match the child's alias set as sent (no re-normalization, no home expansion); bash
matches the command as the reference reads it (comment lines stripped, trimmed: `values.py`),
skill the name, other surfaces their candidate values. A bare `path` /
`external_directory` ask folds over both directional members, most restrictive first. A child
floor clamps a rule `allow` (never a session grant) to `ask`, unless yolo keeps it. Asking units
are judged one by one as bash commands with their own floors, and the most restrictive wins.

A session grant that matches is checked once more against the config alone: when the config
denies, the deny stands. Likewise an allow of pi-authorizer's own `--rules` file that wins is
checked once more against the other layers alone (`Policy.others`): when they deny, the deny stands
(issue 34 finding 1: a rule written from an ask never overrides a deny of another layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.rules import evaluate
from core.rules.model import PATH_SURFACES, Action, Rule, Step, family_members, more_restrictive
from core.rules.policy import Policy
from core.rules.sources import AUTHORIZER
from core.rules.values import bash_match_value
from core.wire.decisions import RuleDecision, SessionApprovalDecision, decision_source_json
from core.wire.facts import AskingUnit, IntentFacts

RulesDecision = RuleDecision | SessionApprovalDecision
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


class PolicyJudge:
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
        if len(members) == 1:
            return self._member(members[0], values, unit)
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
            matched = tuple(map(bash_match_value, originals)) if surface == "bash" else originals
        match = self._match(candidates, surface, matched, originals)
        if match.rule.layer == "session":
            config_only = self._backed(self._match(self.policy.candidates(surface), surface, matched,
                                                   originals), surface, matched, originals, unit)
            if config_only.rule.action == "deny":
                self._record({"step": "grant-overridden", "surface": surface, "unit": unit,
                              "grant": match.rule.pattern, "deny": config_only.rule.to_json(),
                              "value": config_only.value})
                match = config_only
        else:
            match = self._backed(match, surface, matched, originals, unit)
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

    def _backed(self, match: evaluate.Match, surface: str, matched: Sequence[str],
                originals: Sequence[str], unit: str | None) -> evaluate.Match:
        """`match`, unless it is an allow of the `--rules` file that the other layers deny: then
        their deny."""
        rule = match.rule
        if rule.action != "allow" or rule.origin != AUTHORIZER or rule.layer != "config":
            return match
        others = self.policy.others()
        if others is None:
            return match
        below = self._match(others.candidates(surface), surface, matched, originals)
        if below.rule.action != "deny":
            return match
        self._record({"step": "authorizer-allow-overridden", "surface": surface, "unit": unit,
                      "allow": rule.pattern, "deny": below.rule.to_json(), "value": below.value})
        return below

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


def decision_of(verdict: Action, surface: str, outcome: Outcome | None) -> RulesDecision | None:
    """The response `decidedBy` of an auto-decision (the wire's own type); None for an ask.

    One value per distinct `decidedBy` (an immutable wire model): the asks one rule decides carry the
    same value, built once (at most `MAX_DECISIONS` kept: children choose the surface). Callable from
    any thread without a lock: two threads missing at once each build an equal value, and the last
    one kept wins (values compared by identity only to skip work: `core.serving.judgment.rule_response`)."""
    if verdict == "ask" or outcome is None:
        return None
    rule = outcome.rule
    session = rule.layer == "session"
    key = (session, surface, rule.pattern if session else outcome.matched_pattern, outcome.origin)
    decision = _DECISIONS.get(key)
    if decision is None:
        decision = SessionApprovalDecision(surface=surface, pattern=rule.pattern) if session else \
            RuleDecision(surface=surface, pattern=outcome.matched_pattern, origin=outcome.origin)
        if len(_DECISIONS) >= MAX_DECISIONS:
            _DECISIONS.clear()
        _DECISIONS[key] = decision
    return decision


MAX_DECISIONS = 1024
_DECISIONS: dict[tuple[bool, str, str | None, str], RulesDecision] = {}


def _decided_by_preview(surface: str, outcome: Outcome) -> dict[str, object] | None:
    decision = decision_of(outcome.verdict, surface, outcome)
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
