"""The child-fixed facts a judgment runs on, as plain values: what the rules and the chain links
judge, and what the wire reads `accessIntent` into (a leaf: it imports nothing). Who owns the facts:
`docs/design/contract.md` § Facts and judgment.

Nothing here re-derives a path.
`requesterCwd` and `principal` are deliberately absent: they are provenance, not facts to judge.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AskingUnit:
    """One bash chain unit the child left at `ask`, with the floor the child raised on it."""

    command: str
    floor: str | None = None


@dataclass(frozen=True, slots=True)
class IntentFacts:
    """Surface, alias set, boundary form, child floor and asking units of one forwarded ask."""

    surface: str
    match_values: tuple[str, ...]
    boundary_value: str | None = None
    floor: str | None = None
    asking_units: tuple[AskingUnit, ...] | None = None
