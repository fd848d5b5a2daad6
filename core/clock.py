"""The one clock of the process: every time read in shipped code goes through a `Clock`, so tests drive time.

Wall time stamps what is recorded and sent (history rows, `respondedAt`, quarantine ages); monotonic time
measures windows and deadlines (key grace, heartbeats) and never jumps. Both come from one injected object,
and so does waiting for an interval (`wait` on the event loop, `sleep` on a worker thread): a test's
`ManualClock` ends either when it is advanced.
"""

from __future__ import annotations

import asyncio
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
    """Key safety's clock (`tui.keysafety`): monotonic time, and a key event's own stamp on it."""

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
        # Not `asyncio.wait_for`: on Python 3.11 it swallows a cancellation that lands in the step
        # the event is set (a stop sets its event and cancels the tasks): `asyncio.wait` never does.
        if event.is_set():
            return True
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait((waiter,), timeout=seconds)
        finally:
            waiter.cancel()
        return event.is_set()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def key_time(self, stamped: float) -> float:
        """Textual stamps key events with `time.monotonic`: the stamp already is this clock's time."""
        return stamped


def wall_ms(clock: Clock) -> int:
    """Wall time in whole milliseconds, the unit of every timestamp on the wire."""
    return int(clock.wall() * 1000)


async def wait_either(change: asyncio.Event, stop: asyncio.Event, at_most_s: float, clock: Clock) -> None:
    """Until `change` or `stop` is set, or `at_most_s` seconds pass on `clock` (a file watch's wait:
    the timeout is the safety rescan, so tests drive it with a manual clock)."""
    woken = asyncio.Event()
    waiters = [asyncio.ensure_future(change.wait()), asyncio.ensure_future(stop.wait())]
    for waiter in waiters:
        waiter.add_done_callback(lambda _: woken.set())
    try:
        await clock.wait(woken, at_most_s)
    finally:
        for waiter in waiters:
            waiter.cancel()


SYSTEM_CLOCK = SystemClock()
