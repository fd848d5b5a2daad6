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

from core.rules import Policy, Rule
from core.vocabulary.asks import Judgment
from core.wire.decisions import SessionApprovalDecision
from core.wire.facts import IntentFacts

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

    def get(self, key: Hashable, policy: Policy, rules: tuple[Rule, ...]) -> Kept | None:
        """The judgment kept for `key`, if it was made under this very `policy` and `rules` (no lock: a
        dictionary read, and `keep` replaces entries whole; any thread)."""
        kept = self._kept.get(key)
        if kept is None or kept.policy is not policy or kept.rules is not rules:
            return None
        return kept

    def keep(self, key: Hashable, kept: Kept, facts: IntentFacts | None) -> None:
        """Keep `kept` for `key` from its second judgment on (an ask seen once, as most of a burst of
        different commands are, costs a hash, not a judgment held in memory), unless its facts are large."""
        with self._lock:
            if key not in self._kept:
                seen = hash(key)
                if seen not in self._seen:
                    if len(self._seen) >= MAX_SEEN:
                        self._seen.clear()
                    self._seen.add(seen)
                    return
            if facts is not None and facts_size(facts) > MAX_KEPT_CHARS:
                return
            if len(self._kept) >= MAX_KEPT:
                for old in list(self._kept)[: MAX_KEPT // 2]:
                    del self._kept[old]
            self._kept[key] = kept


def facts_size(facts: IntentFacts) -> int:
    """About how many characters the facts hold (what keeping them costs)."""
    units = facts.asking_units or ()
    return (sum(map(len, facts.match_values)) + len(facts.match_values) + len(facts.boundary_value or "")
            + sum(len(u.command) + len(u.floor or "") + 1 for u in units) + len(facts.surface)
            + len(facts.floor or ""))

