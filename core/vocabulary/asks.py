"""What the serving core hands on: a judged ask, and the arbiters that decide what is left at `ask`.

An `Ask` is one request this node could not decide by rule or chain: a value carrying the child's
facts (as sent), this node's explanation of why it asks and the child's deadline. An arbiter
never touches the ask or its files: `decide()` returns its decision as a value (`Decision`, or
`LEAVE`), and the serving core publishes it. What became of a decision reaches the one who waits on
it through the decision's `reply`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple, Protocol, TypeVar, overload, runtime_checkable

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.rules.settings import DEFAULT_FORWARDING_TIMEOUT_MS as DEFAULT_FORWARDING_TIMEOUT_MS
from core.wire.decisions import DecisionSource, UnavailableDecision
from core.wire.request import ForwardedRequest, ParsedRequest
from core.wire.response import ForwardedResponse, deny

Verdict = Literal["allow", "deny", "ask"]
T = TypeVar("T")


class LazySequence(Sequence[T]):
    """A sequence built on first read: the explanation trail costs ten times the verdict, and
    most asks (decided by rule, or denied fail-safe) are never explained to anyone."""

    def __init__(self, build: Callable[[], Sequence[T]]) -> None:
        self._build: Callable[[], Sequence[T]] | None = build
        self._items: tuple[T, ...] = ()

    def _get(self) -> tuple[T, ...]:
        if self._build is not None:
            self._items, self._build = tuple(self._build()), None
        return self._items

    @property
    def built(self) -> bool:
        """Whether anyone has read it yet (tests and benchmarks check the laziness)."""
        return self._build is None

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        return self._get()[index]

    def __len__(self) -> int:
        return len(self._get())

    def __iter__(self) -> Iterator[T]:
        return iter(self._get())

    def __repr__(self) -> str:
        return f"LazySequence({self._get()!r})" if self.built else "LazySequence(<not built>)"


class AskKey(NamedTuple):
    """(served session, request file name): unique within one forwarding root. (A named tuple: hashed
    and compared without a call of Python, at every lookup of the tables keyed by it.)"""

    session_id: str
    name: str


@dataclass(frozen=True)
class Judgment:
    """This node's recorded-authority verdict and the explanation behind it (possibly `LazySequence`)."""

    verdict: Verdict
    decided_by: DecisionSource | None = None
    reason: str | None = None
    explanation: Sequence[str] = ()
    trail: Sequence[dict[str, object]] = ()
    config_errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answered:
    """What became of a decision: `written` is False when it was not published; `gone` says whether the
    ask is gone too (withdrawn, answered, set aside) or still waits for a decision (a failed write)."""

    written: bool
    why_not: str | None = None
    gone: bool = True
    #: Decided and recorded, and waiting for the disk to be written (never withdrawn, never asked again).
    waiting: bool = False
    #: Not written because another authorizer decided it first (who, in words): the ask leaves the
    #: person's queue as decided elsewhere, never as withdrawn by its child.
    elsewhere: str | None = None


@dataclass(frozen=True)
class Decision:
    """A verdict: the response to publish and who made it (`outcome`: `rule`, `chain`, `fail-safe`,
    `user`...). `reply`, when set, is told what became of it (the person's decision call waits on it)."""

    response: ForwardedResponse
    outcome: str
    reply: asyncio.Future[Answered] | None = None
    #: A courier's relay: the target it carried the ask to, and the node that decided there when the
    #: response cannot name it (a broker's approver answers as this node's own session).
    carried_to: str | None = None

    @property
    def by_person(self) -> bool:
        """The person decided: an answer that cannot be written leaves the ask before them, in place."""
        return by_person(self.outcome)


#: The outcome of the person's decision, as recorded (the wire's `decidedBy.kind` for it).
PERSON = "user"


def by_person(outcome: str) -> bool:
    """Whether a decision's (or a recorded verdict's) `outcome` is the person's."""
    return outcome == PERSON


class Leave:
    """A terminal's decision to answer nothing: the request stays for another authorizer."""

    def __repr__(self) -> str:
        return "LEAVE"


LEAVE: Final = Leave()
ArbiterDecision = Decision | Leave


@dataclass(frozen=True)
class Ask:
    """A request waiting for a terminal verdict (a value: nothing outside the serving core changes it)."""

    key: AskKey
    parsed: ParsedRequest
    judgment: Judgment
    arrived_at: float
    timeout_ms: int
    responder_session_id: str

    @property
    def request(self) -> ForwardedRequest:
        return self.parsed.request

    @property
    def has_facts(self) -> bool:
        return self.parsed.access_intent is not None

    @property
    def deadline_ms(self) -> float:
        """When the child gives up: `createdAt` + `forwardingTimeoutMs` (child clock)."""
        return self.request.created_at + self.timeout_ms

    def seconds_left(self, now: float) -> float:
        """Seconds until the child gives up, at wall time `now` (from the caller's clock)."""
        return max(0.0, (self.deadline_ms - now * 1000) / 1000)


class Arbiter(Protocol):
    """The last judge of a node: a person, a fail-safe denial, or leaving the ask for another."""

    name: str

    def decide(self, ask: Ask) -> asyncio.Future[ArbiterDecision]:
        """The decision on `ask`: already done for the fail-safe and leave; pending while a person thinks.
        Asked again for the same ask when its decision could not be written."""
        ...

    def withdraw(self, key: AskKey, reason: str | None = None) -> None:
        """The ask is gone (the child withdrew, or it was set aside): no decision on it is taken.
        `reason`: why, when it was not the child (another server answered it)."""
        ...


@runtime_checkable
class DecidesAtOnce(Protocol):
    """An arbiter whose decision is always taken on the spot (the fail-safe, leave): the route takes
    it without a future (a burst of asks no rule decides makes none); `decide` is `at_once` of it."""

    def decide_at_once(self, ask: Ask) -> ArbiterDecision:
        """The decision on `ask`, taken now."""
        ...


def at_once(decision: ArbiterDecision) -> asyncio.Future[ArbiterDecision]:
    """A decision taken at once, as an arbiter returns it."""
    future: asyncio.Future[ArbiterDecision] = asyncio.get_running_loop().create_future()
    future.set_result(decision)
    return future


UNATTENDED_REASON = "no person is attending this authorizer"
#: What the agent reads (20.7.3 relays `denialReason` of any denial; without one it says "User denied").
UNATTENDED_DENIAL = (
    "pi-authorizer denied this for safety: no rule of this node allows it and no person is attending "
    "this authorizer to approve it"
)


class DenyingArbiter:
    """`--on-ask deny`: answer at once so the child does not wait out its timeout."""

    name = "deny"

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        #: The last decision taken, with its responder and millisecond: a burst's asks denied within
        #: one millisecond share it (a response is a value of these alone; it is never changed).
        self._last: tuple[str, int, Decision] | None = None

    def decide(self, ask: Ask) -> asyncio.Future[ArbiterDecision]:
        return at_once(self.decide_at_once(ask))

    def decide_at_once(self, ask: Ask) -> ArbiterDecision:
        return self.decide_unasked(ask.responder_session_id)

    def decide_unasked(self, responder: str) -> ArbiterDecision:
        """`decide_at_once` of any ask `responder` serves: the fail-safe reads nothing else of it, so
        the at-once lane builds no `Ask` for it (`core.serving.at_once`)."""
        now, last = wall_ms(self.clock), self._last
        if last is not None and last[1] == now and last[0] == responder:
            return last[2]
        response = deny(
            responder=responder,
            at_ms=now,
            decided_by=UnavailableDecision(reason=UNATTENDED_REASON),
            reason=UNATTENDED_DENIAL,
        )
        decision = Decision(response, "fail-safe")
        self._last = (responder, now, decision)  # one tuple replaced whole: safe from any thread
        return decision

    def withdraw(self, key: AskKey, reason: str | None = None) -> None:
        """Nothing is held, so nothing to withdraw."""


class LeavingArbiter:
    """`--on-ask leave`: touch nothing, so another authorizer (or a later run) can answer."""

    name = "leave"

    def decide(self, ask: Ask) -> asyncio.Future[ArbiterDecision]:
        return at_once(LEAVE)

    def decide_at_once(self, ask: Ask) -> ArbiterDecision:
        return LEAVE

    def decide_unasked(self, responder: str) -> ArbiterDecision:
        """`decide_at_once` of any ask: leave reads nothing of it."""
        return LEAVE

    def withdraw(self, key: AskKey, reason: str | None = None) -> None:
        """Nothing is held, so nothing to withdraw."""
