"""The seams a node's behaviour is driven through, bundled in one value passed once (`Seams`).

Production passes the defaults: the system clock, the real disk, no fault, the publisher's retry
delays. Tests pass fakes from `core.testing` (a `ManualClock`, a disk that fails or holds, a fault hook
that kills the process at a named stage) instead of patching a module, so what they drive is the
shipped code path itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.clock import SYSTEM_CLOCK, Clock
from core.disk.writer import DISK, DiskWriter

#: Called by name at each durable stage of a write (publishing, quarantine, a history transaction);
#: crash tests kill the process at one stage and prove a restart completes or undoes what was left.
FaultHook = Callable[[str], None]

#: How long a failed write waits before each retry (then it gives up and says why).
RETRY_DELAYS_S: tuple[float, ...] = (0.05, 0.25, 1.0)


def no_fault(stage: str) -> None:
    """The production fault hook: every stage simply goes on."""


@dataclass(frozen=True)
class Seams:
    """Time, the disk, the fault hook and the retry delays of one node."""

    clock: Clock = SYSTEM_CLOCK
    disk: DiskWriter = DISK
    fault: FaultHook = no_fault
    retry_delays: tuple[float, ...] = RETRY_DELAYS_S


#: The seams of a production node.
PRODUCTION = Seams()
