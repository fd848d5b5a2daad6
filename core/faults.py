"""The fault seam: a hook called by name at each durable stage of a write (publishing, quarantine).

Crash tests pass a hook that kills the process at one stage and prove a restart completes or undoes
what was left; in production every stage simply goes on (`no_fault`).
"""

from __future__ import annotations

from collections.abc import Callable

FaultHook = Callable[[str], None]


def no_fault(stage: str) -> None:
    """The production fault hook: every stage simply goes on."""
