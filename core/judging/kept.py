"""Judgments kept for identical asks: a burst of one command, or of asks without facts, is judged once.

A judgment is a pure function of the child's facts (or, without them, why they were dropped), the
composed policy of the ask's agent and the session's grant rules. The policy and the rules are
values replaced whole when a file or a grant changes (`PolicyStore.policy`, `SessionGrants.rules`),
so a kept judgment is used again only while the very same policy and rules are in force (identity,
never equality): it then says exactly what judging again says (`tests/judging/test_kept.py` compares
them on both readings, across reloads and grants). What is not a pure function stays per ask: a
session grant's use is counted, a config error logged (`RecordedAuthority.judge`).

An ask is kept when it comes a second time (a burst of different commands keeps nothing). Memory stays
bounded whatever the children send: `MAX_KEPT` judgments (the oldest half dropped when full), none for
facts over `MAX_KEPT_CHARS` characters, and `MAX_SEEN` hashes of asks seen once.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

from core.rules import Policy, Rule
from core.vocabulary.asks import Judgment
from core.wire.decisions import SessionApprovalDecision
from core.wire.facts import AskingUnit

MAX_KEPT = 1024
MAX_SEEN = 4 * MAX_KEPT
MAX_KEPT_CHARS = 2048


@dataclass(frozen=True, slots=True)
class Kept:
    """One judgment and what it was judged under."""

    policy: Policy
    rules: tuple[Rule, ...]
    judgment: Judgment
    #: The session grant that decided (its use is counted at every ask it decides), else None.
    grant: SessionApprovalDecision | None


class KeptJudgments:
    """Judgments by ask (facts, agent, served session), each valid under its own policy and rules."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, Kept] = {}
        #: Hashes of the asks judged once and not kept: an ask is kept when it comes again.
        self._seen: set[int] = set()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every judgment (the files changed: none would be used again, and each holds its policy)."""
        with self._lock:
            self._kept.clear()

    def get(self, key: Hashable, policy: Policy, rules: tuple[Rule, ...]) -> tuple[Kept | None, bool]:
        """The judgment kept for `key`, if it was made under this very `policy` and `rules`, and whether
        a judgment made now is to be kept (`keep`): from an ask's second judgment on. An ask seen once,
        as most of a burst of different commands are, costs a hash here, not a judgment held in memory.
        No lock: a dictionary read (`keep` replaces entries whole), and the seen hashes are a set each
        operation of which is one step under the GIL (a race forgets hashes, or marks one twice)."""
        kept = self._kept.get(key)
        if kept is not None:
            if kept.policy is policy and kept.rules is rules:
                return kept, False
            return None, True  # kept under other rules: judged again, kept again
        seen = hash(key)
        if seen in self._seen:
            return None, True
        if len(self._seen) >= MAX_SEEN:
            self._seen.clear()
        self._seen.add(seen)
        return None, False

    def keep(self, key: Hashable, policy: Policy, rules: tuple[Rule, ...], judgment: Judgment,
             grant: SessionApprovalDecision | None, facts: Facts | None) -> None:
        """Keep `judgment` for `key` (as `get` said), unless its facts are large."""
        if facts is not None and facts_size(facts) > MAX_KEPT_CHARS:
            return
        with self._lock:
            if len(self._kept) >= MAX_KEPT:
                for old in list(self._kept)[: MAX_KEPT // 2]:
                    del self._kept[old]
            self._kept[key] = Kept(policy, rules, judgment, grant)


class Facts(Protocol):
    """The child's facts as `IntentFacts` or the wire's `ForwardedAccessIntent` hold them (sized alike)."""

    @property
    def surface(self) -> str: ...
    @property
    def match_values(self) -> tuple[str, ...]: ...
    @property
    def boundary_value(self) -> str | None: ...
    @property
    def floor(self) -> str | None: ...
    @property
    def asking_units(self) -> tuple[AskingUnit, ...] | None: ...


def facts_size(facts: Facts) -> int:
    """About how many characters the facts hold (what keeping them costs)."""
    units = facts.asking_units or ()
    return (sum(map(len, facts.match_values)) + len(facts.match_values) + len(facts.boundary_value or "")
            + sum(len(u.command) + len(u.floor or "") + 1 for u in units) + len(facts.surface)
            + len(facts.floor or ""))

