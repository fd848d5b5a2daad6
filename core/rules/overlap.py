"""Whether an allow pattern can approve a value the rules in force deny: decided exactly.

A rule pattern (after home expansion) is a regular language: `*` any run of characters, `?` any
one character, everything else literal, anchored; a pattern ending in `" *"` is also the same
pattern without that tail. So "is there a value this allow matches, this deny matches, and no
later non-deny rule matches?" is an emptiness question on a product of small automata, decided
here by a breadth-first search over the product's states — no sampled witnesses (issue 34
finding 1). The alphabet is infinite, but every character no pattern names behaves alike, so the
search tries each named character plus one fresh one. The search finds the shortest common
value, shown to the person as an example.

Each pattern is a union of at most two globs; a glob's state is the set of positions it may be at
(a `*` loops on itself). A later rule is tracked by its subset (determinised on the fly): the value
must leave it rejecting. The states are bounded (`MAX_STATES`); a search that reaches the bound
answers "may overlap" (`UNDECIDED`), so a refusal errs on the safe side, never an approval.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

#: Product states explored before the search gives up and answers `UNDECIDED`.
MAX_STATES = 20_000
#: The answer when the bound was reached: treated as an overlap (the safe side).
UNDECIDED: Final = "\x00undecided"
_FRESH = "xyz_0#"

_Glob = str
_State = frozenset[tuple[int, int]]


def alternatives(expanded: str) -> tuple[_Glob, ...]:
    """The globs a pattern (already home-expanded) stands for: itself, and without an optional
    trailing `" *"` (`git *` matches `git`)."""
    if expanded.endswith(" *"):
        return (expanded, expanded[:-2])
    return (expanded,)


class _Automaton:
    """The union of a pattern's globs as a nondeterministic automaton over positions."""

    __slots__ = ("globs",)

    def __init__(self, globs: Sequence[_Glob]) -> None:
        self.globs = tuple(globs)

    def start(self) -> _State:
        return self._closure({(g, 0) for g in range(len(self.globs))})

    def _closure(self, states: set[tuple[int, int]]) -> _State:
        todo = list(states)
        while todo:
            g, i = todo.pop()
            glob = self.globs[g]
            if i < len(glob) and glob[i] == "*" and (g, i + 1) not in states:
                states.add((g, i + 1))
                todo.append((g, i + 1))
        return frozenset(states)

    def step(self, state: _State, char: str) -> _State:
        moved: set[tuple[int, int]] = set()
        for g, i in state:
            glob = self.globs[g]
            if i >= len(glob):
                continue
            piece = glob[i]
            if piece == "*":
                moved.add((g, i))
            elif piece in ("?", char):
                moved.add((g, i + 1))
        return self._closure(moved) if moved else frozenset()

    def accepts(self, state: _State) -> bool:
        return any(i == len(self.globs[g]) for g, i in state)

    def literals(self) -> set[str]:
        return {c for glob in self.globs for c in glob if c not in "*?"}


def common_value(allow: str, deny: str, later: Sequence[str] = ()) -> str | None:
    """The shortest value both `allow` and `deny` match and no pattern of `later` matches, or None
    when there is none (all patterns home-expanded, as the matcher compares them). `UNDECIDED`
    when the search reached `MAX_STATES`."""
    if not _edges_meet(allow, deny):
        return None
    a, d = _Automaton(alternatives(allow)), _Automaton(alternatives(deny))
    rest = [_Automaton(alternatives(p)) for p in later if _edges_meet(allow, p) and _edges_meet(deny, p)]
    named = a.literals() | d.literals()
    for automaton in rest:
        named |= automaton.literals()
    fresh = next((c for c in _FRESH if c not in named), None)
    if fresh is None:
        fresh = next(chr(n) for n in range(0x100, 0x10FFFF) if chr(n) not in named)
    alphabet = [*sorted(named), fresh]
    start = (a.start(), d.start(), tuple(r.start() for r in rest))
    parents: dict[object, tuple[object, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        sa, sd, sr = state
        if a.accepts(sa) and d.accepts(sd) and not any(r.accepts(s) for r, s in zip(rest, sr, strict=True)):
            return _spell(parents, state)
        for char in alphabet:
            na, nd = a.step(sa, char), d.step(sd, char)
            if not na or not nd:
                continue
            nxt = (na, nd, tuple(r.step(s, char) if s else s for r, s in zip(rest, sr, strict=True)))
            if nxt in parents:
                continue
            if len(parents) >= MAX_STATES:
                return UNDECIDED
            parents[nxt] = (state, char)
            queue.append(nxt)
    return None


def _spell(parents: dict[object, tuple[object, str] | None], state: object) -> str:
    chars: list[str] = []
    link = parents[state]
    while link is not None:
        state, char = link
        chars.append(char)
        link = parents[state]
    return "".join(reversed(chars))


def _edges_meet(first: str, second: str) -> bool:
    """A cheap necessary condition: some glob of each agrees on their literal heads and tails
    (a head is the text before the first wildcard). False proves the two match no common value."""
    return any(_heads_agree(f, s) and _heads_agree(f[::-1], s[::-1])
               for f in alternatives(first) for s in alternatives(second))


def _heads_agree(first: str, second: str) -> bool:
    for x, y in zip(first, second, strict=False):
        if x == "*" or y == "*":
            return True
        if x != y and x != "?" and y != "?":
            return False
    return len(first) == len(second) or "*" in first[len(second):] + second[len(first):]
