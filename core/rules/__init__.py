"""Recorded authority: this node's own rules, judged against child-fixed facts.

The child owns the facts, this node the judgment: `docs/contract.md` § Facts and judgment.

Pure Python (no UI imports). The serving layer builds one `PolicyStore`, a `Resolver` over it
and one `SessionGrants` per served session, converts each forwarded `accessIntent` into
`IntentFacts`, and calls `Resolver.resolve`. A request without usable facts never reaches the
rules: `explain_no_facts()` is its verdict (`ask`).
"""

from core.facts import AskingUnit, IntentFacts
from core.rules.config import PolicyStore, suspicious_agent_reason
from core.rules.model import Action, ConfigError, Rule
from core.rules.policy import Policy
from core.rules.render import render_trail
from core.rules.resolver import Resolution, Resolver, explain_no_facts, resolve_with_policy
from core.rules.scopes import FileSignature
from core.rules.session import GrantRefused, RecordedGrant, SessionGrants, ShadowedDeny
from core.rules.settings import Settings

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
    "Resolver",
    "Rule",
    "SessionGrants",
    "Settings",
    "ShadowedDeny",
    "explain_no_facts",
    "render_trail",
    "resolve_with_policy",
    "suspicious_agent_reason",
]
