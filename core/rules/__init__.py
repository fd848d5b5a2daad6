"""Recorded authority: this node's own rules, judged against child-fixed facts.

The child owns the facts, this node the judgment: `docs/design/contract.md` § Facts and judgment.

Pure Python (no UI imports). The serving layer builds one `PolicyStore` and one `SessionGrants`
per served session, converts each forwarded `accessIntent` into `IntentFacts`, and judges them
with `explain_policy(store.policy(agent), facts, grants.rules())` (keeping the judgment for
identical asks: `core.judging.kept`; a new plain ask by the policy's compiled reading,
`Policy.compiled`, `core.rules.compiled`); `explain(store, facts, agent, rules)` is the same through
`resolve_with_policy`'s own reuse. A request without usable facts never reaches the rules:
`explain_no_facts()` is its verdict (`ask`).
"""

from core.rules.agent_names import suspicious_agent_reason
from core.rules.config import PolicyStore
from core.rules.model import Action, ConfigError, Rule
from core.rules.policy import Policy
from core.rules.resolver import Resolution, explain_no_facts, resolve_with_policy
from core.rules.scopes import FileSignature
from core.rules.session_grants import GrantRefused, RecordedGrant, SessionGrants, ShadowedDeny
from core.rules.settings import Settings
from core.rules.trail import render_trail
from core.wire.facts import AskingUnit, IntentFacts

__all__ = [
    "Action",
    "AskingUnit",
    "ConfigError",
    "FileSignature",
    "GrantRefused",
    "IntentFacts",
    "Policy",
    "PolicyStore",
    "RecordedGrant",
    "Resolution",
    "Rule",
    "SessionGrants",
    "Settings",
    "ShadowedDeny",
    "explain_no_facts",
    "render_trail",
    "resolve_with_policy",
    "suspicious_agent_reason",
]
