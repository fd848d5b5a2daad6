"""This node's whole-serving-session grants as a person sees them: who made each, when, for which
ask, how many asks it has decided since; and revoking one. Textual-free.

`core.rules.SessionGrants` holds the grants' rules (what the resolver appends); this module keeps
the provenance and use counts beside them, keyed by the same grant ids, so listing and revoking
never change how a grant matches. Revoking removes the grant's rules from its session's book:
the next ask is judged without it. Thread-safe: a grant's use is counted by whichever thread judged
the ask it decided (the disk thread, the event loop), while the loop lists, makes and revokes grants.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.rules import SessionGrants
from core.rules.model import family_members
from core.rules.session_grants import RecordedGrant
from core.wire.decisions import SessionApprovalDecision

#: Session rules are appended to every agent's policy in the session (`RecordedAuthority.explain`).
SESSION_SCOPE = "all agents of the session"


@dataclass(frozen=True)
class GrantEntry:
    """One live grant, for the grants screen."""

    session_id: str
    grant_id: str
    surface: str
    pattern: str
    agent_scope: str
    made_at: float
    made_by: str
    asked_by: str
    decided: int


@dataclass(frozen=True)
class _Provenance:
    made_by: str
    asked_by: str


class GrantLog:
    """Provenance and use counts of grants, keyed `(session id, grant id)`."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], _Provenance] = {}
        self._decided: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def made(self, session_id: str, grants: Sequence[RecordedGrant], asked_by: str, by: str = "you") -> None:
        """`by` recorded `grants` while answering an ask of agent `asked_by`."""
        with self._lock:
            for grant in grants:
                self._made[(session_id, grant.id)] = _Provenance(by, asked_by)

    def decided(self, session_id: str, decision: SessionApprovalDecision, book: SessionGrants) -> None:
        """Count an ask a session grant decided (`decision` as the resolver made it)."""
        surface, pattern = decision.surface, decision.pattern
        for grant in book.list():
            if grant.pattern == pattern and surface in (grant.surface, *family_members(grant.surface)):
                with self._lock:
                    self._decided[(session_id, grant.id)] += 1
                return

    def forget(self, session_id: str, grant_id: str) -> None:
        with self._lock:
            self._made.pop((session_id, grant_id), None)
            self._decided.pop((session_id, grant_id), None)

    def entries(self, books: Mapping[str, SessionGrants]) -> list[GrantEntry]:
        """Every live grant, oldest first within each session."""
        out: list[GrantEntry] = []
        with self._lock:
            made_by, decided = dict(self._made), Counter(self._decided)
        for session_id, book in books.items():
            for grant in book.list():
                made = made_by.get((session_id, grant.id), _Provenance("?", "?"))
                out.append(GrantEntry(
                    session_id=session_id,
                    grant_id=grant.id,
                    surface=grant.surface,
                    pattern=grant.pattern,
                    agent_scope=SESSION_SCOPE,
                    made_at=grant.created_at,
                    made_by=made.made_by,
                    asked_by=made.asked_by,
                    decided=decided[(session_id, grant.id)],
                ))
        return out
