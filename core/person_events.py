"""What the person's terminal slot (`core.person.HumanAuthorizer`) tells its listeners, and what it
needs: the events (an ask added, withdrawn, decided), the kinds of decision and the history outcome of
each, the refusal a decision method raises, and the book of serving-session grants it records into.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from core.serving.asks import Ask, AskKey, Judgment
from core.wire.request import ParsedRequest, SessionGrant
from core.wire.response import ForwardedResponse

DecisionKind = Literal[
    "approved",
    "approved_for_session",
    "approved_for_serving_session",
    "approved_by_serving_grant",
    "denied",
    "denied_with_reason",
]
#: The history's `outcome` for each kind (default `user`): `w` and the asks its grant decided differ
#: from a plain `y`, whose response is the same `approved`.
OUTCOMES: dict[str, str] = {
    "approved_for_serving_session": "user_grant",
    "approved_by_serving_grant": "session_grant",
}


@dataclass(frozen=True)
class AskAdded:
    ask: Ask


@dataclass(frozen=True)
class AskWithdrawn:
    """The child gave up (timeout or abandon): the ask can no longer be answered."""

    ask: Ask


@dataclass(frozen=True)
class AskDecided:
    """`granted_on` names the ask whose whole-session grant decided this one (kind `..._by_serving_grant`);
    `also`, on the grant's own decision, the other pending asks that grant decided at once."""

    ask: Ask
    kind: DecisionKind
    response: ForwardedResponse
    decided_at: float
    granted_on: AskKey | None = None
    also: tuple[AskDecided, ...] = ()


HumanEvent = AskAdded | AskWithdrawn | AskDecided


class DecisionRefused(Exception):
    """The decision cannot be taken for this ask (gone, no suggestion, blank reason...)."""


class GrantBook(Protocol):
    """This node's serving-session grants (recorded authority for later forwards)."""

    def refusal(self, agent_name: str, grants: Sequence[SessionGrant]) -> str | None:
        """Why recording these grants must be refused (the deny they would shadow), or None."""

    def record(self, session_id: str, grants: Sequence[SessionGrant], agent_name: str) -> None:
        """Record all grants or none (raises `GrantRefused`)."""

    def judge(
        self, parsed: ParsedRequest, session_id: str, extra: Sequence[SessionGrant] = (),
        preview: bool = False,
    ) -> Judgment:
        """This node's verdict on `parsed`, as if `extra` grants were recorded for `session_id` too
        (`preview`: a what-if, not a decision)."""
