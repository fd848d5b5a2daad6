"""One explanation of how this node's rules judge a request: the `explain` command and the TUI.

Takes the child-fixed `IntentFacts` (the wire reads them), so this module stays independent of the
wire models. A request without facts gets the no-facts floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from core.rules.config import PolicyStore
from core.rules.judge import RulesDecision
from core.rules.model import Action, ConfigError, Rule, Step
from core.rules.policy import Policy
from core.rules.resolver import Resolution, explain_no_facts, resolve_uncached, resolve_with_policy
from core.rules.trail import render_trail
from core.wire.facts import IntentFacts


@dataclass(frozen=True)
class Explanation:
    """Verdict, `decidedBy`, config errors of the policy used, and (built on first read) the trail.

    The verdict comes from one judgment; `trail` and `text` re-run it recording every step, so
    serving pays for them only when the app, `explain` or the history reads them.
    """

    resolution: Resolution
    config_errors: tuple[ConfigError, ...]
    suspicious_agent_reason: str | None

    @property
    def verdict(self) -> Action:
        return self.resolution.verdict

    @property
    def decision(self) -> RulesDecision | None:
        """The typed `decidedBy` (the wire's own model), None for an ask."""
        return self.resolution.decision

    @property
    def decided_by(self) -> dict[str, object] | None:
        return self.resolution.decided_by()

    @property
    def deny_reason(self) -> str | None:
        return self.resolution.deny_reason

    @property
    def trail(self) -> list[Step]:
        return self.resolution.trail

    @cached_property
    def text(self) -> list[str]:
        return render_trail(self.trail)

    def to_json(self) -> dict[str, object]:
        """The `explain --json` object."""
        return {
            "verdict": self.verdict,
            "decidedBy": self.decided_by,
            "trail": self.trail,
            "configErrors": [e.to_json() for e in self.config_errors],
        }


def explain(
    store: PolicyStore,
    facts: IntentFacts | None,
    agent_name: str,
    session_rules: Sequence[Rule] = (),
) -> Explanation:
    """Explain the recorded-authority verdict for one request (`agent_name` is the principal's)."""
    policy = store.policy(agent_name)
    resolution = explain_no_facts() if facts is None else resolve_with_policy(policy, facts, session_rules)
    return Explanation(resolution, policy.errors, policy.suspicious_agent_reason)


def explain_policy(
    policy: Policy, facts: IntentFacts | None, session_rules: Sequence[Rule] = ()
) -> Explanation:
    """`explain` under a policy already composed, judged afresh (for a caller that keeps judgments)."""
    resolution = explain_no_facts() if facts is None else resolve_uncached(policy, facts, session_rules)
    return Explanation(resolution, policy.errors, policy.suspicious_agent_reason)
