"""Keystroke safety: whether a key press commits, arms or is ignored, and why. No Textual logic here.

The promise is that a person never decides what they have not seen. Time starts when a frame
showing the ask (or a confirmation) has been painted, never when a widget was built, so a loaded
machine that paints late only makes keys wait longer. Every rule lives in `KeySafety`; the TUI only
reports events and obeys the `Verdict`.

API (all times come from the injected monotonic clock; `at` is when the key was read):

    safety = KeySafety(clock, KeyRules(grace_s=0.5, double_press=True))
    safety.show(ask_key, hidden=False)     # selection changed (or came back into view): keys wait
    safety.painted(ask_key)                # a frame showing it was painted: the grace starts now
    safety.press("approve", at)            # -> Verdict("arm" | "commit" | "ignore", reason)
    safety.open_modal("grant")             # a confirmation is pushed: the ask's keys are inert
    safety.painted("grant")                # ... and painted: its confirm waits out the grace
    safety.confirm("grant", at)            # -> Verdict for the confirmation's decisive key
    safety.disarm(); safety.expire(now)    # esc; the periodic check of an armed first press
    safety.show(ask_key, hidden)           # back from the modal: paint and grace again

Rules:
- Nothing is accepted before the ask (or modal) is painted, nor within `grace_s` after that
  paint; a key read before the paint is ignored even when it is handled later.
- While a modal is open (pushed, painted or not) every ask key is inert.
- Actions in `rules.double` (once, subagent session, both directions, deny) commit on a second
  press of the same action on the same ask when `double_press` is on, and always for an ask with
  hidden characters; any other press arms instead. Actions that open a step (`w`, `r`, a batch
  preview) commit on one press: the step is the second look.
- An armed press expires after `arm_expiry_s` (None: never, as in pi). It expires here because
  this queue stays open beside other panes all day: a stray key typed into the wrong pane minutes
  later must not complete a decision (pi's dialog exists only while its own agent waits).
- Showing another ask, opening a modal, or `disarm()` clears the armed press.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Literal

from tui.actions import DOUBLE_PRESS

Outcome = Literal["commit", "arm", "ignore"]
Reason = Literal[
    "no-ask",  # nothing selected
    "modal-open",  # a confirmation covers the ask
    "not-painted",  # not on screen yet (or the key was read before it was)
    "in-grace",  # on screen for less than the grace window
    "back-in-grace",  # shown again (a step over it closed) less than the grace window ago
    "first-press",  # armed: press the same key again
    "expired",  # the earlier first press had expired: armed again
    "second-press",  # the armed press completed
    "single-press",  # double press off and nothing hidden
    "opens-step",  # a key whose decision happens in a confirmation step
    "confirmed",  # a modal's decisive key
]

_WHY: dict[Reason, str] = {
    "no-ask": "No ask is selected.",
    "modal-open": "A confirmation is open; ask keys wait until it closes.",
    "not-painted": "Ignored: that key came before the ask was on screen.",
    "in-grace": "Ignored: keys wait a moment after an ask appears, so you see it first.",
    "back-in-grace": "Ignored: keys wait a moment after a dialog closes, so you see the ask again first.",
    "first-press": "Press the same key again to commit.",
    "expired": "The earlier first press had expired; press again to commit.",
    "second-press": "Committed on the second press.",
    "single-press": "Committed.",
    "opens-step": "Opens its confirmation step.",
    "confirmed": "Confirmed.",
}


@dataclass(frozen=True)
class KeyRules:
    grace_s: float = 0.5
    double_press: bool = True
    arm_expiry_s: float | None = 5.0
    double: frozenset[str] = DOUBLE_PRESS  # from the keys' table (`tui.actions`)


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: Reason
    hidden: bool = False  # a double press forced by hidden characters (not by the setting)

    @property
    def why(self) -> str:
        return _WHY[self.reason]


@dataclass(frozen=True)
class Armed:
    action: str
    target: Hashable
    at: float


@dataclass
class _View:
    target: Hashable
    hidden: bool = False
    painted_at: float | None = None
    again: bool = False  # the same ask as before a step covered it (its grace is not a new ask's)


@dataclass
class KeySafety:
    """The safety state of one screen of asks (see the module docstring for the API)."""

    clock: Callable[[], float]
    rules: KeyRules = field(default_factory=KeyRules)
    _view: _View | None = None
    _modal: _View | None = None
    _armed: Armed | None = None

    # -- events -----------------------------------------------------------------------------------

    def show(self, target: Hashable | None, *, hidden: bool = False) -> None:
        """`target` is (again) what the screen shows; keys wait until it is painted. Closes a modal."""
        again = self._view is not None and self._view.target == target and self._modal is not None
        self._view = None if target is None else _View(target, hidden, again=again)
        self._modal = None
        self._armed = None

    def open_modal(self, token: Hashable) -> None:
        """A confirmation step was pushed over the ask; it is not on screen yet."""
        self._modal = _View(token)
        self._armed = None

    def painted(self, token: Hashable, at: float | None = None) -> None:
        """A frame showing `token` (an ask or a modal) has been painted; only the first paint counts."""
        when = self.clock() if at is None else at
        for view in (self._modal, self._view):
            if view is not None and view.target == token and view.painted_at is None:
                view.painted_at = when

    def disarm(self) -> bool:
        """Forget an armed first press; True when there was one."""
        had, self._armed = self._armed is not None, None
        return had

    def expire(self, now: float | None = None) -> bool:
        """Drop an armed press that has expired; True when this call dropped it."""
        if self._armed is not None and self._expired(self._armed, self.clock() if now is None else now):
            self._armed = None
            return True
        return False

    # -- presses ----------------------------------------------------------------------------------

    def press(self, action: str, at: float) -> Verdict:
        """A key for `action` on the shown ask, read at `at`."""
        view = self._view
        if view is None:
            return Verdict("ignore", "no-ask")
        if self._modal is not None:
            return Verdict("ignore", "modal-open")
        waiting = self._waiting(view, at)
        if waiting is not None:
            return Verdict("ignore", waiting)
        if action not in self.rules.double:
            self._armed = None
            return Verdict("commit", "opens-step")
        forced = view.hidden and not self.rules.double_press
        if not (self.rules.double_press or view.hidden):
            self._armed = None
            return Verdict("commit", "single-press")
        armed = self._armed
        if armed is not None and armed.action == action and armed.target == view.target:
            if not self._expired(armed, at):
                self._armed = None
                return Verdict("commit", "second-press", forced)
            self._armed = Armed(action, view.target, at)
            return Verdict("arm", "expired", forced)
        self._armed = Armed(action, view.target, at)
        return Verdict("arm", "first-press", forced)

    def confirm(self, token: Hashable, at: float) -> Verdict:
        """The decisive key of the modal `token`, read at `at`."""
        modal = self._modal
        if modal is None or modal.target != token:
            return Verdict("ignore", "not-painted")
        waiting = self._waiting(modal, at)
        return Verdict("ignore", waiting) if waiting is not None else Verdict("commit", "confirmed")

    # -- queries (legend, timers) -----------------------------------------------------------------

    @property
    def armed(self) -> Armed | None:
        return self._armed

    @property
    def modal_open(self) -> bool:
        return self._modal is not None

    def ready_at(self) -> float | None:
        """When keys start to count for what is in front (modal, else ask); None until painted."""
        view = self._modal or self._view
        if view is None or view.painted_at is None:
            return None
        return view.painted_at + self.rules.grace_s

    def accepting(self, now: float | None = None) -> bool:
        """True when a press now would not be ignored for timing (the legend shows keys usable)."""
        ready = self.ready_at()
        return ready is not None and (self.clock() if now is None else now) >= ready

    # -- internals ----------------------------------------------------------------------------------

    def _waiting(self, view: _View, at: float) -> Reason | None:
        if view.painted_at is None or at < view.painted_at:
            return "not-painted"
        if at < view.painted_at + self.rules.grace_s:
            return "back-in-grace" if view.again else "in-grace"
        return None

    def _expired(self, armed: Armed, at: float) -> bool:
        limit = self.rules.arm_expiry_s
        return limit is not None and at - armed.at > limit
