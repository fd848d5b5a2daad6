"""The seams a node's behaviour is driven through, bundled in one value passed once (`Seams`).

Production passes the defaults: the system clock, the real disk, no fault, the publisher's retry
delays, inotify. Tests pass fakes from `core.testing` (a `ManualClock`, a disk that fails or holds, a
fault hook that kills the process at a named checkpoint) instead of patching a module, so what they
drive is the shipped code path itself.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from core import platform
from core.clock import SYSTEM_CLOCK, Clock
from core.disk.writer import DISK, DiskWriter

log = logging.getLogger("pi_authorizer.serve")
_T = TypeVar("_T")

#: Called by name at each checkpoint of a durable write (a published batch, a quarantine hold, a history
#: transaction); crash tests kill the process at one and prove a restart completes or undoes what was left.
FaultHook = Callable[[str], None]

#: How long a failed write waits before each retry (then it gives up and says why).
RETRY_DELAYS_S: tuple[float, ...] = (0.05, 0.25, 1.0)


def no_fault(checkpoint: str) -> None:
    """The production fault hook: every checkpoint simply goes on."""


@dataclass(frozen=True)
class Seams:
    """Time, the disk, the fault hook, the retry delays, the file watch, the machine's start: one node's."""

    clock: Clock = SYSTEM_CLOCK
    disk: DiskWriter = DISK
    fault: FaultHook = no_fault
    retry_delays: tuple[float, ...] = RETRY_DELAYS_S
    #: Watch the inboxes by listing them, as where inotify is unavailable.
    force_polling: bool = False
    #: When the machine last started (wall clock; None: unknown): whether a power cut may have come
    #: between a verdict recorded and now (`core.serving.reconcile`).
    booted_at: Callable[[], float | None] = platform.booted_at


#: The seams of a production node.
PRODUCTION = Seams()


async def retrying(seams: Seams, step: str, action: Callable[[], _T],
                   run: Callable[[Callable[[], _T]], Awaitable[_T]] | None = None) -> _T:
    """Run blocking `action` off the event loop (`run`: on a thread of the caller's, else the default
    executor); a transient failure (a full or busy disk, a locked database) is retried after each of
    the retry delays, waited on the clock, then raised."""
    delays = (0.0, *seams.retry_delays)
    for attempt, delay in enumerate(delays, start=1):
        if delay:
            await seams.clock.wait(asyncio.Event(), delay)
        try:
            return await (run(action) if run is not None else asyncio.to_thread(action))
        except (OSError, sqlite3.OperationalError) as exc:
            if attempt == len(delays):
                raise
            log.warning("%s failed (attempt %d of %d): %s; retrying", step, attempt, len(delays), exc)
    raise AssertionError("unreachable")
