"""Rules offered from repetition: what the person keeps approving, as one allow rule to confirm.

An offer is only computed here; nothing is written until `core.history.rule_edit.apply` is called
with the file the person confirmed, after seeing its `preview` (the JSON, the file, the diff). An
offer that would loosen an explicit deny of this node's config (`shadowed_deny`, checked again when
the rule is written), or that the person's own denials contradict, is never made.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.history.rows import APPROVED_STATES, HistoryRow
from core.history.store import HistoryStore
from core.rules.config import PolicyStore
from core.rules.evaluate import any_value
from core.rules.matcher import acts_as, compile_wildcard, expand_home
from core.rules.model import PATH_SURFACES, family_members
from core.rules.policy import Policy
from core.rules.session_grants import shadowed_denies

DEFAULT_THRESHOLD = 5
RECENT_DECISIONS = 5000


@dataclass(frozen=True)
class Suggestion:
    """Allow `pattern` on `surface`: the person approved `approvals` asks it covers."""

    surface: str
    pattern: str
    approvals: int
    agents: tuple[str, ...]
    examples: tuple[str, ...]
    last_at: float
    #: The pattern is the child's own session suggestion (shown as the child's), not the value itself.
    from_child: bool = False
    #: What the rule says: `allow` (offered from approvals), or `deny` (a model judge's allow overturned).
    state: Literal["allow", "deny"] = "allow"

    def rule_json(self) -> dict[str, Any]:
        return {"permission": {self.surface: {self.pattern: self.state}}}


__all__ = ["Suggestion", "SuggestionRefused", "acts_as", "shadowed_deny", "suggest", "suggestion_from_ask"]


class SuggestionRefused(Exception):
    """The rule cannot be written to that file (comments, a deny it would loosen, a changed file...)."""


def suggest(
    history: HistoryStore,
    rules: PolicyStore,
    threshold: int = DEFAULT_THRESHOLD,
    recent: int = RECENT_DECISIONS,
) -> list[Suggestion]:
    """Patterns covering at least `threshold` of the person's recent approvals, most approved first."""
    decided = [r for r in history.query(limit=recent * 4) if r.outcome in ("user", "user_grant")][:recent]
    approved: dict[tuple[str, str], list[HistoryRow]] = {}
    childs: set[tuple[str, str]] = set()  # patterns a child sent (shown as the child's)
    for row in decided:
        if row.verdict in APPROVED_STATES:
            for key, from_child in _candidate_patterns(row):
                approved.setdefault(key, []).append(row)
                if from_child:
                    childs.add(key)
    denied = [r for r in decided if r.verdict is not None and r.verdict not in APPROVED_STATES]
    every_agent = set(history.distinct("agent"))
    offers = []
    for (surface, pattern), rows in approved.items():
        if len(rows) < threshold:
            continue
        agents = tuple(sorted({r.agent or "" for r in rows}))
        if _contradicted(rules.home, surface, pattern, denied):
            continue
        if shadowed_deny(rules, surface, pattern, every_agent | set(agents)) is not None:
            continue
        if all(_already_allowed(rules.policy(r.agent or ""), surface, r.value or "") for r in rows):
            continue
        examples = tuple(dict.fromkeys(r.value or "" for r in rows))[:5]
        offers.append(Suggestion(surface, pattern, len(rows), agents, examples, rows[0].arrived_at,
                                 from_child=(surface, pattern) in childs))
    offers.sort(key=lambda s: (-s.approvals, -s.last_at))
    return offers


def suggestion_from_ask(
    rules: PolicyStore,
    surface: str | None,
    match_values: Sequence[str],
    session_grants: Sequence[tuple[str, str]],
    agent: str,
    at: float,
) -> Suggestion:
    """The allow rule that would have decided this one ask: the child's own session suggestion when
    it sent one (it covers the ask), else the exact value. Raises `SuggestionRefused` when no rule
    could match it (no child-fixed facts), when one rule cannot cover it, or when the rule would
    loosen an explicit deny of this node's config."""
    if surface is None:
        raise SuggestionRefused("the ask carries no child-fixed facts: no rule of this node could match it")
    # A child's suggestion only on the ask's own surface and only when it covers the ask's value:
    # never a pattern on another surface, never one that does not even match what was asked.
    candidates = [(s, p) for s, p in session_grants
                  if s == surface and p and _covers(rules.home, surface, p, match_values)]
    from_child = bool(candidates)
    if not candidates:
        values = list(dict.fromkeys(match_values))
        if surface in PATH_SURFACES and values:
            values = values[:1]  # a path's alias set names one file: its first (absolute) form
        if len(values) != 1:
            raise SuggestionRefused("the ask has several values and no child suggestion covering them")
        if set(values[0]) & {"*", "?"}:
            raise SuggestionRefused("the value holds wildcard characters, so an exact rule cannot be written")
        candidates = [(surface, values[0])]
    rule_surface, pattern = candidates[0]
    why = shadowed_deny(rules, rule_surface, pattern, {agent, ""})
    if why is not None:
        raise SuggestionRefused(f"this allow would loosen an explicit deny: {why}")
    return Suggestion(rule_surface, pattern, 1, (agent,), tuple(match_values[:5]), at, from_child=from_child)


def _covers(home: str, surface: str, pattern: str, values: Sequence[str]) -> bool:
    """`pattern` matches one of the ask's `values` (as the rules engine matches them)."""
    wildcard = compile_wildcard(pattern, home)
    return any(wildcard.matches(expand_home(v, home) if surface in PATH_SURFACES else v) for v in values)


def shadowed_deny(rules: PolicyStore, surface: str, pattern: str, agents: Iterable[str]) -> str | None:
    """Every explicit deny this allow would override (file and key, with an example value) for any of
    `agents`, for the agent-neutral layers, or for any agent with an agent file, in both readings;
    None when it overrides none. Decided exactly (`core.rules.overlap`), not sampled: a rule in the
    `--rules` file applies after every agent file, so it must loosen no agent's deny (issue 20
    finding 2, issue 34 finding 1)."""
    found: dict[tuple[object, ...], str] = {}
    for agent in sorted({*agents, "", *rules.known_agents()}):
        policy = rules.policy(agent)
        readings = ((policy, False), (policy.pi_reading, True)) \
            if policy.pi_differs and policy.pi_reading else ((policy, False),)
        for reading, pi in readings:
            for deny in shadowed_denies(reading, surface, pattern, pi=pi):
                key = (deny.surface, deny.pattern, deny.origin, deny.source)
                found.setdefault(key, deny.describe())
    return "; ".join(found.values()) if found else None


def _candidate_patterns(row: HistoryRow) -> list[tuple[tuple[str, str], bool]]:
    """The child's own session suggestion when the person approved it as such (`s`, `w`), else the
    exact value it asked for: a `y` approved the value, never the child's pattern (finding 7).
    Each with whether the pattern is the child's."""
    facts = row.facts_json()
    grants = facts.get("sessionApproval")
    approved_pattern = row.verdict == "approved_for_session" or row.outcome == "user_grant"
    if isinstance(grants, list) and grants and approved_pattern:
        return [((g["surface"], g["pattern"]), True) for g in grants
                if isinstance(g, dict) and g.get("pattern")]
    intent = facts.get("accessIntent")
    if isinstance(intent, dict) and row.surface and row.value and not set(row.value) & {"*", "?"}:
        return [((row.surface, row.value), False)]
    return []


def _contradicted(home: str, surface: str, pattern: str, denied: Sequence[HistoryRow]) -> bool:
    """The person denied something this pattern would allow."""
    wildcard = compile_wildcard(pattern, home)
    for row in denied:
        if row.surface in (surface, *family_members(surface)):
            value = row.value or ""
            if wildcard.matches(expand_home(value, home) if surface in PATH_SURFACES else value):
                return True
    return False


def _already_allowed(policy: Policy, surface: str, value: str) -> bool:
    """This node's rules already allow the value: offering a rule for it would change nothing."""
    for member in family_members(surface):
        matched = expand_home(value, policy.home) if member in PATH_SURFACES else value
        if any_value(policy.candidates(member), (matched,), (value,)).rule.action != "allow":
            return False
    return True
