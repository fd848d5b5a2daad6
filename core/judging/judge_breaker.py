"""The model judge's breaker: after `failures` failures or timeouts within `window_s`, the judge is
unavailable and asks go straight on (to the person, or the fail-safe) without a call; after
`probe_after_s` one ask is let through as a probe, and its success makes the judge available again
(its failure waits another `probe_after_s`). An outage is never a verdict: it only skips the judge.

Time is the node's `Clock` (monotonic): a test's `ManualClock` opens and closes it without sleeping.
Listeners hear each change once (the log and the app's header say so).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Literal

from core.clock import SYSTEM_CLOCK, Clock
from core.text import log_safe

log = logging.getLogger("pi_authorizer.judge")

BreakerState = Literal["available", "unavailable"]


class Breaker:
    """Counts failures in a sliding window; `admit` says whether the next call may go."""

    def __init__(self, failures: int = 3, window_s: float = 60.0, probe_after_s: float = 30.0,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        if failures < 1 or window_s <= 0 or probe_after_s <= 0:
            raise ValueError("the breaker needs failures >= 1 and positive windows")
        self.failures, self.window_s, self.probe_after_s = failures, window_s, probe_after_s
        self.clock = clock
        self.state: BreakerState = "available"
        #: Why it opened (the last failure), while unavailable.
        self.why: str | None = None
        self._recent: deque[float] = deque()
        self._next_probe = 0.0
        self._probing = False
        self.listeners: list[Callable[[BreakerState, str | None], None]] = []

    def admit(self) -> bool:
        """True when a call may go now: always while available; one probe at a time once due."""
        if self.state == "available":
            return True
        if self._probing or self.clock.monotonic() < self._next_probe:
            return False
        self._probing = True
        return True

    def succeeded(self) -> None:
        self._probing = False
        self._recent.clear()
        self._set("available", None)

    def failed(self, why: str) -> None:
        now = self.clock.monotonic()
        self._probing = False
        if self.state == "unavailable":
            self._next_probe = now + self.probe_after_s
            self.why = why
            return
        self._recent.append(now)
        while self._recent and self._recent[0] <= now - self.window_s:
            self._recent.popleft()
        if len(self._recent) >= self.failures:
            self._next_probe = now + self.probe_after_s
            self._set("unavailable", why)

    def abandoned(self) -> None:
        """A call that ended without an answer either way (cancelled at shutdown)."""
        self._probing = False

    def _set(self, state: BreakerState, why: str | None) -> None:
        if state == self.state:
            return
        self.state, self.why = state, why
        if state == "unavailable":
            log.warning("the model judge is unavailable (%d failures in %gs; last: %s): asks go straight on "
                        "without it; a probe in %gs", self.failures, self.window_s, log_safe(why or "?", 300),
                        self.probe_after_s)
        else:
            log.info("the model judge is available again (a probe succeeded)")
        for listener in list(self.listeners):
            try:
                listener(state, why)
            except Exception:
                log.exception("a judge breaker listener failed")
