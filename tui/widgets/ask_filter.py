"""`/` in the queue: which pending asks to show. Terms `agent:` `session:` `surface:` and free text.

Matching is case-insensitive substring search on the child's text as sent (linear in its length);
free text looks at the agent, both session ids, the surface, every match value and the message.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.vocabulary.asks import Ask
from tui.render.ask_facts import primary_surface

FIELDS = ("agent", "session", "surface")


@dataclass(frozen=True)
class AskFilter:
    agent: tuple[str, ...] = ()
    session: tuple[str, ...] = ()
    surface: tuple[str, ...] = ()
    text: tuple[str, ...] = ()

    @classmethod
    def parse(cls, query: str) -> AskFilter:
        terms: dict[str, list[str]] = {name: [] for name in (*FIELDS, "text")}
        for word in query.split():
            name, sep, rest = word.partition(":")
            if sep and name.lower() in FIELDS and rest:
                terms[name.lower()].append(rest.lower())
            else:
                terms["text"].append(word.lower())
        return cls(*(tuple(terms[name]) for name in (*FIELDS, "text")))

    @property
    def active(self) -> bool:
        return bool(self.agent or self.session or self.surface or self.text)

    def matches(self, ask: Ask) -> bool:
        req = ask.request
        intent = ask.parsed.access_intent
        agent = req.requester_agent_name.lower()
        sessions = " ".join((ask.key.session_id, req.requester_session_id)).lower()
        surface = primary_surface(ask).lower()
        if not all(term in agent for term in self.agent):
            return False
        if not all(term in sessions for term in self.session):
            return False
        if not all(term in surface for term in self.surface):
            return False
        if not self.text:
            return True
        values = list(intent.match_values) if intent is not None else []
        haystack = "\n".join([agent, sessions, surface, *values, req.value or "", req.message or ""]).lower()
        return all(term in haystack for term in self.text)
