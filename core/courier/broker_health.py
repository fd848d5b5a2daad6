"""The broker's state as this node last saw it, for the person: connected, unreachable, auth refused,
TLS failure, JetStream missing, clock skew. One log line per change of state, never one per retry
(an unreachable broker retried every 0.2 s logged the same line 25 times in 10 s); observers (the
app's header and sessions screen) are told each change. The words name the address and any key at
fault, never a secret (`core/courier/broker.py`, `unavailable`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from core.courier.broker import BrokerStateName, unavailable

log = logging.getLogger("pi_authorizer.broker")

#: How far past its deadline a parcel must be, on arrival, before this node doubts its own clock.
SKEW_NOTICE_S = 60.0


@dataclass(frozen=True)
class BrokerState:
    url: str
    name: BrokerStateName
    #: A sentence for the person (empty when connected).
    words: str = ""

    @property
    def trouble(self) -> bool:
        return self.name not in ("connected", "connecting")


class BrokerHealth:
    """One broker's state on this node; `saw_*` from whoever talks to it, observers told each change."""

    def __init__(self, url: str) -> None:
        self.state = BrokerState(url, "connecting")
        self._observers: list[Callable[[BrokerState], None]] = []

    def subscribe(self, observer: Callable[[BrokerState], None]) -> None:
        self._observers.append(observer)
        observer(self.state)

    def saw_connected(self) -> None:
        self._set("connected", "")

    def saw_failure(self, exc: BaseException, user: str | None = None) -> None:
        trouble = unavailable(self.state.url, exc, user=user)
        self._set(trouble.state, trouble.words)

    def saw_late_parcel(self, past_s: float) -> None:
        """A parcel arrived already past its deadline by more than `SKEW_NOTICE_S`: every ask would be
        dropped; the person is told this clock may be wrong (once, until the broker is seen well)."""
        if past_s >= SKEW_NOTICE_S:
            self._set("clock skew", f"parcel already {past_s:.0f} s past its deadline: is this clock right?")

    def _set(self, name: BrokerStateName, words: str) -> None:
        if name == self.state.name:
            return  # the same state again (another retry): no new line
        self.state = BrokerState(self.state.url, name, words)
        if self.state.trouble:
            log.warning("broker %s: %s", name, words)
        else:
            log.info("broker %s: %s", self.state.url, name)
        for observer in list(self._observers):
            try:
                observer(self.state)
            except Exception:
                log.error("broker %s: an observer of its state failed", self.state.url, exc_info=True)
