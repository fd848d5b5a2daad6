"""What the publisher records and reports: a verdict and its exact bytes, the ledger that must hold it
before its response is visible (`Ledger`), what became of each answer (`Published`), and the record
of one answer while its batch commits (`BatchItem`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from core.clock import Clock, wall_ms
from core.disk.anonymous import Staged
from core.forwarding.inbox import SessionInbox
from core.vocabulary.asks import AskKey, by_person
from core.vocabulary.events import ServeEvent
from core.wire.decisions import GateErrorDecision
from core.wire.request import ParsedRequest
from core.wire.response import ForwardedResponse, deny


@dataclass(frozen=True)
class VerdictRow:
    """What the history's row of a request says of the `VerdictRecord` an earlier run recorded (read
    back, never written by serving): its exact response bytes, whether it is visible, and who decided
    (`outcome`, as recorded), so republishing it reports the answer as it was made. `ended`: the row is
    closed (its child read it, gave up, or another server answered): the id is used."""

    body: bytes
    written: bool
    outcome: str | None = None
    ended: bool = False
    #: When it was recorded (wall clock; None: not known).
    decided_at: float | None = None


class VerdictRecord(NamedTuple):
    """One verdict to record and deliver (the one name of a verdict on its way: into the history,
    then to the child): the ask, the response, its exact bytes, who decided. The history gives back
    what its row holds of it as a `VerdictRow`. A plain tuple: the at-once lane makes one per ask
    (`tuple.__new__`: 0.15 µs, where the frozen dataclass it was cost 0.57 built in place)."""

    key: AskKey
    parsed: ParsedRequest
    response: ForwardedResponse
    body: bytes
    outcome: str
    #: `Decision.carried_to`: where a courier carried the ask, and who decided there.
    carried_to: str | None = None
    #: When it arrived and the bytes it was read from, for an ask answered in its intake's trip
    #: (`core.serving.at_once`): no arrival of it was queued, its row is written whole with its verdict.
    arrived: float | None = None
    raw: bytes | None = None

    @property
    def request_id(self) -> str:
        return self.parsed.request.id

    @property
    def by_person(self) -> bool:
        """The person decided: an answer that cannot be written leaves the ask before them, in place."""
        return by_person(self.outcome)


class WrittenMark(NamedTuple):
    """The response for `request_id` was linked into place (`written`) or found already there; or not
    delivered after all (`written` False), `why` then saying so (the row ends with it). A plain tuple:
    a burst makes one per ask (a frozen dataclass cost twice as much to make)."""

    key: AskKey
    request_id: str
    written: bool
    why: str | None = None


class Ledger(Protocol):
    """Durable history: verdicts are recorded before their response files become visible."""

    def record_verdicts(self, verdicts: Sequence[VerdictRecord]) -> None:
        """Durable on return, all or nothing."""
        ...

    def expect(self, key: AskKey) -> None:
        """The verdict of `key` is queued for `record_verdicts`: an arrival the ledger holds back
        for it is written with it (a burst's asks wait in the queue longer than a single ask)."""
        ...

    def mark_written(self, marks: Sequence[WrittenMark]) -> None: ...

    def record_quarantined(self, event: ServeEvent) -> None:
        """A file set aside (`quarantined`, `forged`): its row committed before the file moves, so a run
        killed after the move never leaves a quarantined file the history lacks; the event observed
        after the move then adds nothing."""
        ...

    def recorded_verdicts(self, session_id: str, request_ids: Collection[str]) -> dict[str, VerdictRow]:
        """The verdicts recorded for these requests of a session, by request id."""
        ...

    def note_set_aside_answered(self, key: AskKey, raw: bytes) -> None:
        """The child of a file being set aside (these bytes) was answered with its gate denial: noted
        before the file moves, so a run killed before the move never answers it again."""
        ...

    def set_aside_answered(self, key: AskKey, raw: bytes) -> bool:
        """Whether an earlier run answered this file, these very bytes, while setting it aside."""
        ...


class Published(NamedTuple):
    """What became of one answer. `verdict` is what was published (a fail-safe denial when the
    ledger refused the original: `history_failed` says why); `write_failed` means nothing is visible.
    A plain tuple: a burst makes one per ask (a frozen dataclass cost three times as much to make)."""

    verdict: VerdictRecord
    written: bool = False
    history_failed: str | None = None
    write_failed: str | None = None
    withdrawn: bool = False
    """Its request file was gone just before the answer would have been placed: its child gave up (the
    reference's child deletes its request at its deadline), so nothing was placed."""


def gate_denial(responder: str, clock: Clock, reason: str) -> ForwardedResponse:
    """A denial no person made, with the reason the child passes on to its agent."""
    return deny(
        responder=responder,
        at_ms=wall_ms(clock),
        decided_by=GateErrorDecision(reason=reason),
        reason=f"pi-authorizer could not serve this request: {reason}",
    )


@dataclass(slots=True)
class BatchItem:
    """One answer going through a batch of the publisher: its verdict, its temp, what became of it."""

    inbox: SessionInbox
    verdict: VerdictRecord
    done: asyncio.Future[Published]
    history_failed: str | None = None
    write_failed: str | None = None
    temp: Staged | None = None
    synced: bool = False
    written: bool | None = None
    withdrawn: bool = False

    def result(self) -> Published:
        written = bool(self.written) and self.write_failed is None
        return Published(self.verdict, written, self.history_failed, self.write_failed, self.withdrawn)
