"""Thousands of pending asks are long-lived objects: the collector's full passes need not walk them.

CPython's full collection walks every tracked object and runs each time the survivors grew by a
quarter, so taking 10,000 asks in spent seconds walking the same asks again and again (5.3 s of a
19 s intake in `bench.bench_queue`). `Heap.pending` freezes what survives each 250 more asks
taken in (`gc.freeze`: moved out of the collector's sight, in constant time; freed as usual when no
longer referenced: each 1,000 still left 1.5 s of full passes in an intake of 10,000, each 250 left
0.06 s), and `burst_over` what the burst's last asks left; when the queue has shrunk to half
of what it was at the last freeze, or when the app ends, `settle` unfreezes it, so reference
cycles among objects that since became garbage are collected again.
"""

from __future__ import annotations

import gc

#: Freeze after the pending asks grew by this many since the last freeze (or unfreeze).
FREEZE_STEP = 250


class Heap:
    """When to freeze the objects that survive a burst of arrivals, and when to give them back."""

    def __init__(self) -> None:
        self._frozen_at = 0  # the pending count at the last freeze (0: nothing frozen here)
        self._low = 0  # the fewest pending since nothing was frozen

    def pending(self, count: int) -> None:
        """The queue now holds `count` asks (after a batch of arrivals or a departure)."""
        if self._frozen_at and count <= self._frozen_at // 2:
            self.settle()
            self._low = count
        if not self._frozen_at:
            self._low = min(self._low, count)
        if count >= (self._frozen_at or self._low) + FREEZE_STEP:
            gc.freeze()
            self._frozen_at = count

    def burst_over(self, count: int) -> None:
        """Arrivals stopped with `count` pending: freeze what the burst's last asks left (up to
        `FREEZE_STEP` asks' objects that `pending` did not freeze), if the burst was one."""
        if self._frozen_at and count > self._frozen_at:
            gc.freeze()
            self._frozen_at = count

    def settle(self) -> None:
        """Give every frozen object back to the collector (the queue shrank, or the app ends)."""
        if self._frozen_at:
            gc.unfreeze()
            self._frozen_at = 0
