"""The judgment stage's seams: this node's recorded authority (`Judge`), the chain after it, and a node
with no rules. The rules themselves are `core.judging.RecordedAuthority`; links are `core.authorizers`."""

from __future__ import annotations

from typing import Protocol

from core.asks import Judgment
from core.wire.request import ParsedRequest

NO_FACTS_EXPLANATION = (
    "This request carries no child-fixed facts (no usable accessIntent, as from every 20.7.3 child), "
    "so this node's rules cannot judge it: it comes to you."
)


class Judge(Protocol):
    """Recorded authority: this node's own rules, on the child's facts, scoped to its agent."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment: ...


class Chain(Protocol):
    """Non-terminal judges after the rules; `None` means every link deferred."""

    async def review(self, parsed: ParsedRequest) -> Judgment | None: ...


class NoRecordedAuthority:
    """A node with no rules: everything with facts asks by default, everything without floors to ask."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        if parsed.access_intent is None:
            return Judgment(verdict="ask", explanation=(NO_FACTS_EXPLANATION,))
        return Judgment(verdict="ask", explanation=("No rules are loaded on this node: default ask.",))
