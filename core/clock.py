"""The one clock of the process: every time read in shipped code goes through a `Clock`, so tests drive time.

Wall time stamps what is recorded and sent (history rows, `respondedAt`, quarantine ages); monotonic time
measures windows and deadlines (key grace, heartbeats) and never jumps. Both come from one injected object,
and so does waiting for an interval (`wait` on the event loop, `sleep` on a worker thread): a test's
`ManualClock` ends either when it is advanced.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Protocol


class Clock(Protocol):
    def wall(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        """Until `event` is set or `seconds` of monotonic time have passed; whether `event` is set."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling worker thread for `seconds` of monotonic time (never call it on the loop)."""
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

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=seconds)
        return event.is_set()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def key_time(self, stamped: float) -> float:
        """Textual stamps key events with `time.monotonic`: the stamp already is this clock's time."""
        return stamped


class ManualClock:
    """A clock that moves only when told: tests, screenshots and simulations that must be reproducible."""

    def __init__(self, wall: float = 1_700_000_000.0, monotonic: float = 1_000.0) -> None:
        self._wall = wall
        self._monotonic = monotonic
        #: Waits in progress: (monotonic deadline, its loop, the event set when the deadline is reached).
        self._waits: list[tuple[float, asyncio.AbstractEventLoop, asyncio.Event]] = []
        #: Worker threads sleeping: (monotonic deadline, the event set when it is reached); the lock orders
        #: a sleep's registration against `advance` from another thread, so no wake-up is missed.
        self._sleeps: list[tuple[float, threading.Event]] = []
        self._lock = threading.Lock()

    def wall(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._monotonic

    @property
    def waiting(self) -> int:
        """How many waits and sleeps are in progress (a test advances once the code under test waits)."""
        return len(self._waits) + len(self._sleeps)

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        """Ends when `event` is set, or when `advance` has moved monotonic time `seconds` on."""
        due = asyncio.Event()
        entry = (self._monotonic + seconds, asyncio.get_running_loop(), due)
        self._waits.append(entry)
        try:
            if self._monotonic < entry[0]:
                waiters = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(due.wait())]
                try:
                    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        finally:
            self._waits.remove(entry)
        return event.is_set()

    def sleep(self, seconds: float) -> None:
        """Blocks this worker thread until `advance` has moved monotonic time `seconds` on (the loop
        goes on: the test advancing runs there)."""
        due = threading.Event()
        with self._lock:
            entry = (self._monotonic + seconds, due)
            if entry[0] <= self._monotonic:
                return
            self._sleeps.append(entry)
        try:
            due.wait()
        finally:
            with self._lock:
                self._sleeps.remove(entry)

    def advance(self, seconds: float) -> None:
        """Move both clocks on; waits and sleeps whose interval has passed end (from any thread)."""
        with self._lock:
            self._wall += seconds
            self._monotonic += seconds
            for deadline, due_sleep in self._sleeps:
                if deadline <= self._monotonic:
                    due_sleep.set()
        for deadline, loop, due in list(self._waits):
            if deadline <= self._monotonic and not loop.is_closed():
                loop.call_soon_threadsafe(due.set)

    def jump_wall(self, seconds: float) -> None:
        """Step only the wall clock (NTP, a person setting the time): monotonic time does not move."""
        self._wall += seconds


def wall_ms(clock: Clock) -> int:
    """Wall time in whole milliseconds, the unit of every timestamp on the wire."""
    return int(clock.wall() * 1000)


SYSTEM_CLOCK = SystemClock()
