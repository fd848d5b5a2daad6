"""What the serving core hands on: a judged ask, the terminal slots that take what is left at `ask`.

An `Ask` is one request this node could not decide by rule or chain. It carries the child's facts
(as sent), this node's explanation of why it asks, the child's deadline, and the one capability a
terminal needs: `answer()`, which writes the verdict at most once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar, overload

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.rules.settings import DEFAULT_FORWARDING_TIMEOUT_MS as DEFAULT_FORWARDING_TIMEOUT_MS
from core.wire.decisions import DecisionSource, UnavailableDecision
from core.wire.request import ForwardedRequest, ParsedRequest
from core.wire.response import ForwardedResponse, deny

Verdict = Literal["allow", "deny", "ask"]
T = TypeVar("T")


class Deferred(Sequence[T]):
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
        return f"Deferred({self._get()!r})" if self.built else "Deferred(<not built>)"


@dataclass(frozen=True)
class AskKey:
    """(served session, request file name): unique within one forwarding root."""

    session_id: str
    name: str


@dataclass(frozen=True)
class Judgment:
    """This node's recorded-authority verdict and the explanation behind it (possibly `Deferred`)."""

    verdict: Verdict
    decided_by: DecisionSource | None = None
    reason: str | None = None
    explanation: Sequence[str] = ()
    trail: Sequence[dict[str, object]] = ()
    config_errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answered:
    """What became of an `answer()` call: `written` is False when the ask was already gone."""

    written: bool
    why_not: str | None = None
    gone: bool = True


@dataclass
class Ask:
    """A request waiting for a terminal verdict."""

    key: AskKey
    parsed: ParsedRequest
    judgment: Judgment
    arrived_at: float
    timeout_ms: int
    answer_with: Callable[[ForwardedResponse, str], Awaitable[Answered]]
    responder_session_id: str
    withdrawn: bool = False
    outcome: str | None = field(default=None)

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

    async def answer(self, response: ForwardedResponse, outcome: str) -> Answered:
        """Write the verdict once; `outcome` names who decided (`user`, `fail-safe`, ...)."""
        return await self.answer_with(response, outcome)


class TerminalSlot(Protocol):
    """The last judge of a node: a person, a fail-safe denial, or leaving the ask for another."""

    name: str

    async def receive(self, ask: Ask) -> None: ...

    def withdraw(self, key: AskKey) -> None: ...


UNATTENDED_REASON = "no person is attending this authorizer"
#: What the agent reads (20.7.3 relays `denialReason` of any denial; without one it says "User denied").
UNATTENDED_DENIAL = (
    "pi-authorizer denied this for safety: no rule of this node allows it and no person is attending "
    "this authorizer to approve it"
)


class DenyingTerminal:
    """`--on-ask deny`: answer at once so the child does not wait out its timeout."""

    name = "deny"

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock

    async def receive(self, ask: Ask) -> None:
        response = deny(
            responder=ask.responder_session_id,
            at_ms=wall_ms(self.clock),
            decided_by=UnavailableDecision(reason=UNATTENDED_REASON),
            reason=UNATTENDED_DENIAL,
        )
        await ask.answer(response, "fail-safe")

    def withdraw(self, key: AskKey) -> None:
        """Nothing is held, so nothing to withdraw."""


class LeavingTerminal:
    """`--on-ask leave`: touch nothing, so another authorizer (or a later run) can answer."""

    name = "leave"

    async def receive(self, ask: Ask) -> None:
        ask.outcome = "left"

    def withdraw(self, key: AskKey) -> None:
        """Nothing is held, so nothing to withdraw."""
