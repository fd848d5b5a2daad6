"""The deciding rule of a plain ask, found with few Python calls: a burst of new asks at CPython's floor.

`core.rules.resolver` judges every ask in full: both readings, an `Outcome` per step, a `Resolution`
and an `Explanation`, ~60 calls. What a response needs of it (the verdict, `decidedBy`, the denial
reason, the session grant that decided) is a function of the deciding rule alone, and under one policy
and one tuple of session rules there are few deciding rules. `Compiled` is built once per policy
object and session rules (`Policy.compiled`, identity, never equality: a policy is replaced whole when
a file changes, the rules when a grant does) and keeps, per surface, what the full judgment does once:
the candidates with the session tail, whether pi 20.7.3's reading could judge otherwise, and one
shared `Decided` per deciding rule. Judging an ask is then finding that rule (a lookup per value).

It answers only what it knows to be the full judgment's answer, and `None` otherwise (the caller then
judges in full): asking units, a value beyond the BMP, a tool surface whose values pi reads otherwise,
a surface pi's reading composes otherwise (every family ask: 20.7.3 knows no families), a yolo floor,
a surface with no default rule. The trail is never built here: the caller builds it by the full
judgment when someone reads it.
`tests/rules/test_compiled.py` compares both on hostile facts, many configs and grants.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from core.rules.evaluate import Candidates
from core.rules.judge import Outcome, RulesDecision, decision_of
from core.rules.model import (
    DIRECTIONAL_SURFACES,
    PATH_SURFACES,
    Action,
    Rule,
    family_members,
    more_restrictive,
)
from core.rules.pi_reading import PATH_VALUE_SURFACES, beyond_bmp
from core.rules.sources import AUTHORIZER
from core.rules.values import bash_match_value, js_trim
from core.wire.decisions import SessionApprovalDecision
from core.wire.facts import IntentFacts

if TYPE_CHECKING:
    from core.rules.policy import Policy  # which keeps its `Compiled`s beside it

#: Surfaces whose values pi 20.7.3 judges as sent (`core.rules.pi_reading.facts_as_pi` gives the
#: facts themselves, or none for a directional surface, judged as sent by pi's reading of the files).
_AS_SENT = PATH_VALUE_SURFACES | DIRECTIONAL_SURFACES | {"bash", "skill"}
_SINGLE_VALUE_SURFACES = frozenset({"bash", "skill"})
#: Plans kept per compiled policy (children choose the surface).
MAX_PLANS = 256


class Decided(NamedTuple):
    """What the judgment of an ask says, shared by every ask one rule decides alike."""

    verdict: Action
    decision: RulesDecision | None
    reason: str | None
    #: The session grant that decided (its use is counted), else None.
    grant: SessionApprovalDecision | None
    #: The deciding rule is an allow a child's floor turns into ask (`core.rules.judge._floored`).
    floorable: bool


class Compiled:
    """One policy's reading of plain asks, with one tuple of session rules."""

    def __init__(self, policy: Policy, session: tuple[Rule, ...]) -> None:
        self.policy = policy
        self.session = session
        #: The policy's config errors as a judgment names them.
        self.config_errors = tuple(map(str, policy.errors))
        self._plans: dict[str, _Plan] = {}

    def decide(self, surface: str, values: Sequence[str], floor: str | None) -> Decided | None:
        """The judgment's verdict and `decidedBy` of an ask without asking units, or None when only
        the full judgment can tell."""
        plan = self._plans.get(surface)
        if plan is None:
            plan = self._plan(surface)
        if plan.in_full:
            return None
        if plan.tool and values:
            return None  # pi judges a tool on `"*"`, not its values
        if plan.pi_reads and not (surface.isascii() and (values[0].isascii() if len(values) == 1 else all(
                map(str.isascii, values)))) and beyond_bmp(IntentFacts(surface, tuple(values))):
            return None  # pi's `?` sees a character beyond the BMP as two
        only = plan.only
        decided = only.decide(values) if only is not None else plan.decide(values)
        if decided is None or not floor or not decided.floorable:
            return decided
        return plan.floored  # None under yolo: a yolo floor names the floor as its pattern

    def _plan(self, surface: str) -> _Plan:
        plan = _Plan.of(self.policy, self.session, surface)
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        self._plans[surface] = plan
        return plan


class _Plan:
    """One surface of one compiled policy: its members (the surface itself, or a family's two)."""

    __slots__ = ("floored", "in_full", "members", "only", "pi_reads", "tool")

    def __init__(self, members: tuple[_Member, ...], pi_reads: bool, tool: bool, yolo: bool) -> None:
        #: Every ask on this surface is judged in full (see the module).
        self.in_full = not members
        self.members = members
        self.only = members[0] if len(members) == 1 else None
        #: pi 20.7.3's reading exists: a value beyond the BMP is judged in full.
        self.pi_reads = pi_reads
        #: A tool surface: pi judges it on `"*"`, so an ask with values is judged in full.
        self.tool = tool
        #: An allow turned into ask by a child's floor: an ask, decided by nobody.
        self.floored: Decided | None = None if yolo else Decided("ask", None, None, None, False)

    @classmethod
    def of(cls, policy: Policy, session: tuple[Rule, ...], surface: str) -> _Plan:
        """The plan of `surface` (`in_full` when its asks are judged in full: see the module)."""
        pi = policy.pi_directional if surface in DIRECTIONAL_SURFACES else policy.pi_reading
        tool = pi is not None and surface not in _AS_SENT
        if pi is not None and ((tool and js_trim(surface) != surface) or policy.pi_differs_on(surface)):
            return cls((), True, tool, False)  # pi reads another surface (a tool trimmed), or other rules
        members = family_members(surface) if policy.folds else (surface,)
        return cls(tuple(_Member(policy, session, surface, m) for m in members), pi is not None, tool,
                   policy.settings.yolo_mode)

    def decide(self, values: Sequence[str]) -> Decided | None:
        """`PolicyJudge._surface`: each member judged, the most restrictive kept (the first on a tie)."""
        chosen: Decided | None = None
        for member in self.members:
            decided = member.decide(values)
            if decided is None:
                return None
            if chosen is None or more_restrictive(decided.verdict, chosen.verdict):
                chosen = decided
        return chosen


class _Member:
    """One member of a surface (`PolicyJudge._member`): its candidates, how its values are read, and
    the `Decided` of each deciding rule."""

    __slots__ = ("bash", "candidates", "config", "decided", "empty", "last", "name", "path", "policy",
                 "shared", "single", "surface")

    def __init__(self, policy: Policy, session: tuple[Rule, ...], surface: str, name: str) -> None:
        self.policy = policy
        self.surface = surface
        self.name = name
        self.config = policy.candidates(name)
        candidates = self.config
        if session:
            # As `PolicyJudge._member`: without the fold, a family ask meets its members' grants.
            names = (name,) if policy.folds else (name, *family_members(name))
            candidates = candidates.with_tail(
                [r for r in session if any(r.surface_wildcard.matches(n) for n in names)])
        self.candidates = candidates
        self.last = candidates.finder()
        self.path = name in PATH_SURFACES
        self.single = name in _SINGLE_VALUE_SURFACES
        self.bash = name == "bash"
        self.empty = ("",) if self.single else ("*",)
        #: The `Decided` of the rule at each position, once known; never filled for a rule whose
        #: verdict depends on the value too (a session grant, an allow of the `--rules` file).
        self.shared: list[Decided | None] = [None] * len(candidates.rules)
        #: The `Decided`s of those, by (position, list): 0 the candidates, 1 the config alone, 2 the
        #: layers below the `--rules` file.
        self.decided: dict[tuple[int, int], Decided] = {}

    def decide(self, values: Sequence[str]) -> Decided | None:
        if len(values) == 1 or (self.single and values):
            value = values[0]
            if self.bash:
                value = bash_match_value(value)
            at = self.last(value)  # one value: its last matching rule decides
            if at < 0:
                return None  # no rule matched: the full judgment says why
            found = self.shared[at]
            return found if found is not None else self._checked(at, (value,))
        originals = tuple(values) or self.empty
        matched = tuple(map(bash_match_value, originals)) if self.bash else originals
        at = _last(self.candidates, matched, self.path)
        if at < 0:
            return None
        found = self.shared[at]
        return found if found is not None else self._checked(at, matched)

    def _checked(self, at: int, matched: Sequence[str]) -> Decided | None:
        """The rule at `at`, checked as `PolicyJudge._member` checks it: a session grant against the
        config alone (its deny stands), an allow of the `--rules` file against the other layers."""
        rule: Rule | None = self.candidates.rules[at]
        assert rule is not None
        key = (at, 0)
        if rule.layer == "session":
            config_at = _last(self.config, matched, self.path)
            if config_at < 0:
                return None
            config_rule, config_key = self._backed(self.config, config_at, 1, matched)
            if config_rule is None:
                return None
            if config_rule.action == "deny":
                rule, key = config_rule, config_key
        elif _authorizer_allow(rule) and self.policy.others() is not None:
            rule, key = self._backed(self.candidates, at, 0, matched)
        else:
            shared = self.shared[at] = self._shared(rule)  # the same whatever the value
            return shared
        if rule is None:
            return None
        found = self.decided.get(key)
        if found is None:
            found = self.decided[key] = self._shared(rule)
        return found

    def _backed(self, candidates: Candidates, at: int, kind: int,
                matched: Sequence[str]) -> tuple[Rule | None, tuple[int, int]]:
        """`PolicyJudge._backed`: the rule at `at`, unless it is an allow of the `--rules` file that
        the other layers deny: then their deny."""
        rule = candidates.rules[at]
        others = self.policy.others()
        if not _authorizer_allow(rule) or others is None:
            return rule, (at, kind)
        below_candidates = others.candidates(self.name)
        below = _last(below_candidates, matched, self.path)
        if below < 0:
            return None, (at, kind)
        if below_candidates.rules[below].action != "deny":
            return rule, (at, kind)
        return below_candidates.rules[below], (below, 2)

    def _shared(self, rule: Rule) -> Decided:
        """The verdict and `decidedBy` of an ask `rule` decides, built as the full judgment builds them."""
        pattern = rule.pattern if rule.layer in ("config", "session") else None
        outcome = Outcome(self.name, rule, "", rule.action, rule.origin, pattern)
        decision = decision_of(rule.action, self.surface, outcome)
        reason = rule.reason if rule.action == "deny" else None
        grant = decision if isinstance(decision, SessionApprovalDecision) else None
        floorable = rule.action == "allow" and rule.layer != "session"
        return Decided(rule.action, decision, reason, grant, floorable)


def _authorizer_allow(rule: Rule) -> bool:
    return rule.action == "allow" and rule.origin == AUTHORIZER and rule.layer == "config"


def _last(candidates: Candidates, matched: Sequence[str], path: bool) -> int:
    """The deciding position: `evaluate.any_value` on a path surface, else `evaluate.first_candidate`
    (-1 when no rule matched: the full judgment then says why)."""
    if path:
        best = -1
        for value in matched:
            index = candidates.last_index(value)
            if index > best:
                best = index
        return best
    first = -1
    for value in matched:
        index = candidates.last_index(value)
        if index < 0:
            return -1
        if candidates.rules[index].layer != "default":
            return index
        if first < 0:
            first = index
    return first
