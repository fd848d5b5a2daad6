"""`/` in the queue: which pending asks to show. Terms `agent:` `session:` `surface:` and free text.

Matching is case-insensitive substring search on the child's text as sent (linear in its length);
free text looks at the agent, both session ids, the surface, every match value and the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import cast

from core.vocabulary.asks import Ask
from tui.render.ask_facts import primary_surface

FIELDS = ("agent", "session", "surface")
Fields = tuple[str, str, str, str]


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
        return self.matches_fields(self.fields(ask))

    @staticmethod
    def fields(ask: Ask) -> Fields:
        """What the terms are searched in, lower-cased: (agent, sessions, surface, free-text haystack).
        Made once per ask by the queue's index, so a keystroke only searches strings."""
        req = ask.request
        intent = ask.parsed.access_intent
        agent = req.requester_agent_name.lower()
        sessions = " ".join((ask.key.session_id, req.requester_session_id)).lower()
        surface = primary_surface(ask).lower()
        values = list(intent.match_values) if intent is not None else []
        haystack = "\n".join([agent, sessions, surface, *values, req.value or "", req.message or ""]).lower()
        return agent, sessions, surface, haystack

    def matches_fields(self, fields: Fields) -> bool:
        agent, sessions, surface, haystack = fields
        return (all(term in agent for term in self.agent) and all(term in sessions for term in self.session)
                and all(term in surface for term in self.surface)
                and all(term in haystack for term in self.text))

    def narrows(self, before: AskFilter) -> bool:
        """Every ask this filter lets through `before` lets through too: each of its terms holds one
        of `before`'s (at the same place, in the same field) and it may have more (all must match)."""
        return all(len(new) >= len(old) and all(o in n for o, n in zip(old, new, strict=False))
                   for old, new in ((before.agent, self.agent), (before.session, self.session),
                                    (before.surface, self.surface), (before.text, self.text)))


class FilterIndex:
    """The filter's index over the pending asks: each ask's lower-cased fields made once, as it
    comes (`add`, not on the first key), and laid out as four columns of strings on the first
    keystroke after the asks changed, so a keystroke with thousands pending is one substring test
    per ask and term, and a term typed on only searches the asks the last keystroke kept."""

    def __init__(self) -> None:
        self._fields: dict[int, tuple[Ask, Fields]] = {}  # by the ask's identity (the entry holds it)
        self._asks: Sequence[Ask] = ()
        self._columns: tuple[Sequence[str], ...] | None = ((), (), (), ())  # None: made on next select
        self._last: tuple[AskFilter, list[int]] | None = None  # the last filter and the indexes it kept

    def add(self, asks: Iterable[Ask]) -> None:
        """Index these asks as they arrive (what the first keystroke would otherwise do for all)."""
        fields = self._fields
        for ask in asks:
            if id(ask) not in fields:
                fields[id(ask)] = (ask, AskFilter.fields(ask))

    def update(self, pending: Sequence[Ask]) -> None:
        """Index exactly `pending` (the person's ordered asks: the same tuple again costs nothing)."""
        if pending is not self._asks:
            self._asks, self._columns, self._last = pending, None, None
            if len(self._fields) > len(pending) + max(256, len(pending) // 4):  # asks gone, now and then
                kept = set(map(id, pending))
                self._fields = {i: entry for i, entry in self._fields.items() if i in kept}

    def _laid_out(self) -> tuple[Sequence[str], ...]:
        if self._columns is not None:
            return self._columns
        asks, fields = self._asks, self._fields
        found = list(map(fields.get, map(id, asks)))  # one C loop over thousands
        missing = [i for i, entry in enumerate(found) if entry is None] if None in found else []
        for i in missing:
            ask = asks[i]
            found[i] = fields[id(ask)] = (ask, AskFilter.fields(ask))
        entries = cast("list[tuple[Ask, Fields]]", found)
        if len(fields) > len(asks):  # asks gone: their fields go too (memory follows the asks)
            self._fields = dict(zip(map(id, asks), entries, strict=True))
        self._columns = tuple(zip(*map(_FIELDS, entries), strict=True)) if asks else ((), (), (), ())
        return self._columns

    def select(self, flt: AskFilter) -> list[Ask]:
        """The indexed asks `flt` lets through, in their order."""
        columns = self._laid_out()
        last = self._last
        narrowed = last is not None and flt.narrows(last[0])
        indexes: Sequence[int] = last[1] if last is not None and narrowed else range(len(self._asks))
        for terms, column in zip((flt.agent, flt.session, flt.surface, flt.text), columns, strict=True):
            for term in terms:
                indexes = [i for i in indexes if term in column[i]]
        kept = list(indexes)
        self._last = (flt, kept)
        asks = self._asks
        return [asks[i] for i in kept]


_FIELDS = itemgetter(1)
