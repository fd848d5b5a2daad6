"""A whole-session grant's reach: the grants an ask would record as this node's session rules, why
recording them is refused, which other pending asks the grant would decide at once, and whether
"both directions" is a different width for them. `core.person.HumanAuthorizer` asks these questions
for the person before and when a grant is confirmed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from core.person_events import GrantBook
from core.rules.model import DIRECTIONAL_SURFACES
from core.serving.asks import Ask, AskKey
from core.wire.request import SessionGrant

NO_FACTS_GRANT = (
    "a whole-session grant cannot apply to asks without facts: this node's rules never judge such an "
    "ask (it always goes to a person), so the grant could never match anything"
)


def serving_grants_of(ask: Ask) -> tuple[SessionGrant, ...]:
    """The exact (surface, pattern) rules a whole-session approval of `ask` would record."""
    suggestion = ask.request.session_approval
    return () if suggestion is None else suggestion.grants


def grant_refusal(ask: Ask, book: GrantBook | None) -> str | None:
    """Why a whole-session grant from `ask` cannot be recorded, or None."""
    grants = serving_grants_of(ask)
    if not ask.has_facts:
        return NO_FACTS_GRANT
    if not grants:
        return "the child sent no session suggestion, so there is no grant to record"
    if book is None:
        return "this authorizer keeps no serving-session grants"
    return book.refusal(ask.request.requester_agent_name, grants)


def grant_reach(ask: Ask, book: GrantBook | None, pending: Iterable[Ask]) -> tuple[Ask, ...]:
    """The other `pending` asks a whole-session grant from `ask` would decide (shown before confirming).

    Same served session, with facts, asking now, and allowed once the grant is recorded.
    """
    key: AskKey = ask.key
    grants = serving_grants_of(ask)
    if book is None or not grants:
        return ()
    return tuple(
        other for other in pending
        if other.key != key and other.key.session_id == key.session_id and other.has_facts
        and book.judge(other.parsed, key.session_id, preview=True).verdict == "ask"
        and book.judge(other.parsed, key.session_id, grants, preview=True).verdict == "allow"
    )


def proven_direction(grants: Sequence[SessionGrant]) -> str | None:
    """`read` or `write` when every grant is on a directional surface of that one direction, else None
    (pi's `provenDirectionOf`: only then is "both directions" a different width)."""
    directions = {g.surface.rsplit("_", 1)[-1] for g in grants if g.surface in DIRECTIONAL_SURFACES}
    if not grants or len(directions) != 1 or any(g.surface not in DIRECTIONAL_SURFACES for g in grants):
        return None
    return directions.pop()
