"""The one clock of the process: every time read in shipped code goes through a `Clock`, so tests drive time.

Wall time stamps what is recorded and sent (history rows, `respondedAt`, quarantine ages); monotonic time
measures windows and deadlines (key grace, heartbeats) and never jumps. Both come from one injected object.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...


class KeyClock(Protocol):
    """Key safety's clock (`core.keysafety`): monotonic time, and a key event's own stamp on it."""

    def monotonic(self) -> float: ...

    def key_time(self, stamped: float) -> float:
        """When the key was read, from the UI toolkit's stamp of the key event."""
        ...


class SystemClock:
    """The real clocks (a `Clock` and a `KeyClock`)."""

    def wall(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def key_time(self, stamped: float) -> float:
        """Textual stamps key events with `time.monotonic`: the stamp already is this clock's time."""
        return stamped


class ManualClock:
    """A clock that moves only when told: tests, screenshots and simulations that must be reproducible."""

    def __init__(self, wall: float = 1_700_000_000.0, monotonic: float = 1_000.0) -> None:
        self._wall = wall
        self._monotonic = monotonic

    def wall(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        self._wall += seconds
        self._monotonic += seconds

    def jump_wall(self, seconds: float) -> None:
        """Step only the wall clock (NTP, a person setting the time): monotonic time does not move."""
        self._wall += seconds


def wall_ms(clock: Clock) -> int:
    """Wall time in whole milliseconds, the unit of every timestamp on the wire."""
    return int(clock.wall() * 1000)


SYSTEM_CLOCK = SystemClock()
