"""Last-match-wins evaluation over one surface's candidate rules (contract §6.4, §6.5).

`any_value` is `evaluateAnyValue` (path surfaces: the last rule matching any alias wins) and
`first_candidate` is `evaluateFirst` (the first candidate that hits a non-default rule wins).
Both can record what they consulted for the explanation trail; the same code decides either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.rules.model import Rule

Step = dict[str, object]


@dataclass(frozen=True, slots=True)
class Match:
    """The winning rule and the value it was matched on."""

    rule: Rule
    value: str


def any_value(candidates: Sequence[Rule], values: Sequence[str], originals: Sequence[str]) -> Match:
    """The last rule (by position) matching any of `values`; reports the first alias it matches.

    `values` are what is matched (home-expanded), `originals` what is reported.
    """
    for rule in reversed(candidates):
        test = rule.pattern_wildcard.matches
        for value, original in zip(values, originals, strict=True):
            if test(value):
                return Match(rule, original)
    raise LookupError("no rule matched; the synthesized default should always match")


def first_candidate(candidates: Sequence[Rule], values: Sequence[str]) -> Match:
    """The first value whose last matching rule is not the default; else `values[0]`'s match."""
    fallback: Match | None = None
    for value in values:
        match = _last_match(candidates, value)
        if match.rule.layer != "default":
            return match
        fallback = fallback or match
    assert fallback is not None
    return fallback


def _last_match(candidates: Sequence[Rule], value: str) -> Match:
    for rule in reversed(candidates):
        if rule.pattern_wildcard.matches(value):
            return Match(rule, value)
    raise LookupError("no rule matched; the synthesized default should always match")


def consulted(candidates: Sequence[Rule], values: Sequence[str], originals: Sequence[str]) -> list[Step]:
    """For the trail: per value, every candidate rule in position order and whether it matched."""
    return [
        {
            "value": original,
            "rules": [
                {"position": index, **rule.to_json(), "matched": rule.pattern_wildcard.matches(value)}
                for index, rule in enumerate(candidates)
            ],
        }
        for value, original in zip(values, originals, strict=True)
    ]
