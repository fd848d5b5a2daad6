"""Last-match-wins evaluation over one surface's candidate rules (`docs/design/contract.md` § Rules).

`any_value` is `evaluateAnyValue` (path surfaces: the last rule matching any alias wins) and
`first_candidate` is `evaluateFirst` (the first candidate that hits a non-default rule wins).
A surface's candidates are indexed once (exact patterns in a dict, wildcards scanned from the
last rule down), so finding the last matching rule never backtracks; the trail re-checks each
rule on its own (`consulted`) to show the person what matched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.rules.model import Rule, Step


@dataclass(frozen=True, slots=True)
class Match:
    """The winning rule and the value it was matched on."""

    rule: Rule
    value: str


class Candidates:
    """Rules in position order, plus an index answering "which is the last to match" quickly.

    `tail` rules (this node's session grants) come after every compiled rule; they change often
    and are few, so they are checked one by one and never force a re-index.
    """

    def __init__(self, compiled: Sequence[Rule], tail: Sequence[Rule] = (),
                 index: _LastMatch | None = None) -> None:
        self.compiled = tuple(compiled)
        self.tail = tuple(tail)
        self.rules = self.compiled + self.tail
        self._index = index if index is not None else _LastMatch(self.compiled)

    def with_tail(self, tail: Sequence[Rule]) -> Candidates:
        """The same compiled rules followed by `tail`."""
        return Candidates(self.compiled, tail, self._index) if tail else self

    def finder(self) -> Callable[[str], int]:
        """`last_index` itself, or the index's own lookup when there is no tail (one call fewer)."""
        return self.last_index if self.tail else self._index.last

    def last_index(self, value: str) -> int:
        """Position of the last rule matching `value`, or -1."""
        if self.tail:
            for offset in range(len(self.tail) - 1, -1, -1):
                if self.tail[offset].pattern_wildcard.matches(value):
                    return len(self.compiled) + offset
        return self._index.last(value)


class _LastMatch:
    """Exact-text rules in a dict; wildcard rules grouped by the literal head they start with.

    A value is looked up once per distinct head length, so only the wildcard rules whose head it
    starts with (and those without a head) are tried, from the last one down, never below the
    best hit so far; each test is linear-time (see `core.rules.matcher`). A literal prefix (`/tmp/*`)
    matches whatever starts with its head, so it needs no test; `git *` is the text `git` (an exact
    entry) and the prefix `git ` (the most common rule shape: one call fewer per value).
    """

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.exact: dict[str, int] = {}
        by_head: dict[int, dict[str, list[tuple[int, Callable[[str], bool] | None]]]] = {}
        headless: list[tuple[int, Callable[[str], bool]]] = []
        for position, rule in enumerate(rules):
            wildcard = rule.pattern_wildcard
            head, expanded = wildcard.head, wildcard.expanded
            test: Callable[[str], bool] | None = wildcard.matches
            if wildcard.literal is not None:
                self.exact[wildcard.literal] = position
                continue
            if not head:
                headless.append((position, wildcard.matches))
                continue
            if expanded == head + "*":
                test = None  # a literal prefix: its head is the whole test
            elif expanded == head + " *":
                self.exact[head] = max(self.exact.get(head, -1), position)  # the optional tail absent
                head, test = head + " ", None
            heads = by_head.setdefault(len(head), {})
            heads.setdefault(head, []).append((position, test))
        #: (head length, head -> its rules from the last down), shortest heads first.
        self.by_head = tuple((size, {head: tuple(reversed(found)) for head, found in heads.items()})
                             for size, heads in sorted(by_head.items()))
        self.headless = tuple(reversed(headless))

    def last(self, value: str) -> int:
        """Each group is scanned from its last rule down, never below the best hit so far (the
        scan is written out in place: this runs for every value of every ask)."""
        best = self.exact.get(value, -1)
        length = len(value)
        for size, heads in self.by_head:
            if size > length:
                break
            for position, test in heads.get(value[:size], ()):
                if position <= best:
                    break
                if test is None or test(value):
                    best = position
                    break
        for position, matches in self.headless:
            if position <= best:
                break
            if matches(value):
                return position
        return best


def any_value(candidates: Candidates, values: Sequence[str], originals: Sequence[str]) -> Match:
    """The last rule (by position) matching any of `values`; reports the first alias it matches.

    `values` are what is matched (home-expanded), `originals` what is reported.
    """
    best, reported = -1, ""
    for value, original in zip(values, originals, strict=True):
        index = candidates.last_index(value)
        if index > best:
            best, reported = index, original
    if best < 0:
        raise LookupError("no rule matched; the synthesized default should always match")
    return Match(candidates.rules[best], reported)


def first_candidate(candidates: Candidates, values: Sequence[str]) -> Match:
    """The first value whose last matching rule is not the default; else `values[0]`'s match."""
    fallback: Match | None = None
    for value in values:
        index = candidates.last_index(value)
        if index < 0:
            raise LookupError("no rule matched; the synthesized default should always match")
        match = Match(candidates.rules[index], value)
        if match.rule.layer != "default":
            return match
        fallback = fallback or match
    assert fallback is not None
    return fallback


def consulted(candidates: Candidates, values: Sequence[str], originals: Sequence[str]) -> list[Step]:
    """For the trail: per value, every candidate rule in position order and whether it matched
    (`matchedAs` when the text matched is not the value as sent, e.g. a bash comment stripped)."""
    return [
        {
            "value": original,
            **({"matchedAs": value} if value != original else {}),
            "rules": [
                {"position": index, **rule.to_json(), "matched": rule.pattern_wildcard.matches(value)}
                for index, rule in enumerate(candidates.rules)
            ],
        }
        for value, original in zip(values, originals, strict=True)
    ]
