"""This node's serving-session grants, and the refusal of grants that would shadow a deny.

A whole-session grant only turns an `ask` into `allow`. It is refused when it could override an
explicit `deny` in **any** agent's scope of this node's config (the agent-neutral layers and every
agent file), not only the requesting agent's: the grant covers every agent of the session, so a
grant made while answering agent A must not approve agent B's ask that B's rules deny. The
resolver enforces the same order again at judgment time (a config deny beats a grant), so a deny
this heuristic misses, or one added after the grant, still stands.

Shadow check (exact, `core.rules.overlap`): a grant is refused when some value it matches is one
this node's config denies now, in either reading (ours and pi 20.7.3's): a value an explicit deny
matches and no later non-deny rule matches. The search is exact (no sampled witnesses); the value
it finds is shown as the example. A search that reaches its bound counts as an overlap.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from core.clock import SYSTEM_CLOCK, Clock
from core.rules.config import PolicyStore
from core.rules.matcher import expand_home, utf16_units
from core.rules.model import Rule, family_members, make_rule
from core.rules.overlap import UNDECIDED, common_value, edges_meet
from core.rules.policy import Policy


@dataclass(frozen=True, slots=True)
class RecordedGrant:
    """One grant this node recorded (a person's whole-serving-session approval): an allow of
    `pattern` on `surface` (a family covers both members)."""

    id: str
    surface: str
    pattern: str
    created_at: float
    rules: tuple[Rule, ...]


@dataclass(frozen=True, slots=True)
class ShadowedDeny:
    """The deny rule a grant would override, named for the person."""

    grant_surface: str
    grant_pattern: str
    surface: str
    pattern: str
    origin: str
    source: str | None
    witness: str
    agent: str = ""

    def describe(self) -> str:
        """One line for the TUI."""
        where = f" ({self.source})" if self.source else ""
        whose = f" of agent {self.agent!r}" if self.agent else ""
        return (f"{self.grant_surface} {self.grant_pattern!r} would override deny "
                f"{self.surface} {self.pattern!r} [{self.origin}]{whose}{where}, e.g. {self.witness!r}")


class GrantRefused(ValueError):
    """A whole-serving-session grant that cannot be recorded; the message says why in words a person
    reads. `shadowed` names the explicit denies it would override (empty for other reasons)."""

    def __init__(self, reason: str, shadowed: tuple[ShadowedDeny, ...] = ()) -> None:
        super().__init__(reason)
        self.shadowed = shadowed


class SessionGrants:
    """The grants of one served session: in memory only, cleared with the session.

    Thread-safe: the event loop adds and revokes grants while another thread judges (`rules`, one
    tuple replaced whole) and counts a grant's use (`list`); the shadow check runs outside the lock."""

    def __init__(self, store: PolicyStore, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.clock = clock
        self._grants: dict[str, RecordedGrant] = {}
        self._ids = itertools.count(1)
        self._rules: tuple[Rule, ...] = ()
        self._lock = threading.Lock()

    def add(self, grants: Iterable[tuple[str, str]], agent_name: str) -> list[RecordedGrant]:
        """Record all `(surface, pattern)` grants, or none: raises `GrantRefused` on a shadow."""
        wanted = [(s, p) for s, p in grants if s and p]
        shadowed = tuple(
            found for s, p in wanted if (found := self.would_shadow_deny(agent_name, s, p))
        )
        if shadowed:
            raise GrantRefused("; ".join(s.describe() for s in shadowed), shadowed)
        added = []
        with self._lock:
            for surface, pattern in wanted:
                rules = grant_rules(surface, pattern, self.store.home)
                grant = RecordedGrant(f"g{next(self._ids)}", surface, pattern, self.clock.wall(), rules)
                self._grants[grant.id] = grant
                added.append(grant)
            if added:
                self._changed()
        return added

    def list(self) -> tuple[RecordedGrant, ...]:
        """Grants in recording order."""
        with self._lock:
            return tuple(self._grants.values())

    def revoke(self, grant_id: str) -> bool:
        """Forget one grant; False when there was none with that id."""
        with self._lock:
            if self._grants.pop(grant_id, None) is None:
                return False
            self._changed()
        return True

    def rules(self) -> tuple[Rule, ...]:
        """The session rules to append at check time, in recording order: one value until a grant
        is added or revoked (a judgment kept for identical asks holds while it is the same)."""
        return self._rules

    def _changed(self) -> None:
        self._rules = tuple(rule for grant in self._grants.values() for rule in grant.rules)

    def would_shadow_deny(self, agent_name: str, surface: str, pattern: str) -> ShadowedDeny | None:
        """The first explicit deny this grant would override: `agent_name`'s policy first, then
        the agent-neutral one and every other agent that has an agent file. One policy per agent
        file (up to `MAX_AGENT_FILES` per folder): the answer is remembered by the store until a file
        changes, so the check before a confirmation and the one at recording compose them once."""
        agents = self.store.known_agents()
        key = ("would_shadow_deny", agent_name, surface, pattern, agents)
        return self.store.remembered(key, lambda: self._shadowed(agent_name, surface, pattern, agents))

    def _shadowed(self, agent_name: str, surface: str, pattern: str,
                  agents: tuple[str, ...]) -> ShadowedDeny | None:
        for name in dict.fromkeys((agent_name, "", *agents)):
            policy = self.store.policy(name)
            readings = (policy, policy.pi_reading) if policy.pi_differs and policy.pi_reading else (policy,)
            for reading in readings:  # pi 20.7.3's reading is judged too, so its denies count
                found = find_shadowed_deny(reading, surface, pattern, pi=reading is not policy)
                if found is not None:
                    return found
        return None


def grant_rules(surface: str, pattern: str, home: str) -> tuple[Rule, ...]:
    """The session `allow` rules one grant records (a bare family covers both members)."""
    return tuple(
        make_rule(member, pattern, "allow", origin="session", layer="session", home=home)
        for member in family_members(surface)
    )


def find_shadowed_deny(policy: Policy, surface: str, pattern: str, *,
                       pi: bool = False) -> ShadowedDeny | None:
    """The first explicit deny of `policy` (one reading; `pi` for pi 20.7.3's) that an allow of
    `pattern` on `surface`, placed after every rule, would override for some value."""
    found = shadowed_denies(policy, surface, pattern, pi=pi, first=True)
    return found[0] if found else None


def shadowed_denies(policy: Policy, surface: str, pattern: str, *, pi: bool = False,
                    first: bool = False) -> list[ShadowedDeny]:
    """Every explicit deny of `policy` that an allow of `pattern` on `surface`, placed after every
    rule, would override: for each, a value the allow matches, the deny matches and no later
    non-deny rule matches (so the config resolves it to `deny` now). Exact (`core.rules.overlap`)."""
    expanded = expand_home(pattern, policy.home, brace_home=not pi)
    allow = utf16_units(expanded) if pi else expanded
    found: list[ShadowedDeny] = []
    seen: set[tuple[str, str, str]] = set()
    literal = not any(c in allow for c in "*?")
    for member in dict.fromkeys((*family_members(surface), surface)):
        candidates = policy.candidates(member)
        rules = candidates.rules
        if literal:  # one value: the rules in force say exactly what it resolves to
            at = candidates.last_index(expanded)
            winner = rules[at] if at >= 0 else None
            if winner is not None and winner.action == "deny" and not (
                    winner.layer == "default" and winner.origin == "builtin"):
                found.append(ShadowedDeny(surface, pattern, winner.surface, winner.pattern, winner.origin,
                                          winner.source, expanded, policy.agent_name))
                if first:
                    return found
            continue
        texts = [_text(r, pi) for r in rules]
        # The non-deny rules that could take a common value back, found once (most cannot).
        takers = [(j, texts[j]) for j, r in enumerate(rules)
                  if r.action != "deny" and edges_meet(allow, texts[j])]
        for index, deny in enumerate(rules):
            if deny.action != "deny" or (deny.layer == "default" and deny.origin == "builtin"):
                continue
            key = (deny.surface, deny.pattern, deny.origin)
            if key in seen or not edges_meet(allow, texts[index]):  # most denies end here, cheaply
                continue
            later = [text for j, text in takers if j > index]
            value = common_value(allow, texts[index], later)
            if value is None:
                continue
            seen.add(key)
            example = "(undecided within the search bound: counted as overlapping)" \
                if value == UNDECIDED else value
            found.append(ShadowedDeny(surface, pattern, deny.surface, deny.pattern, deny.origin,
                                      deny.source, example, policy.agent_name))
            if first:
                return found
    return found


def _text(rule: Rule, pi: bool) -> str:
    expanded = rule.pattern_wildcard.expanded
    return utf16_units(expanded) if pi else expanded
