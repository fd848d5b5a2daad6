"""A response this node did not just write: an answer of an earlier run (reconciled after a restart),
or a forgery.

For every request read, before it is judged, `earlier()` says what was left for it: a verdict the
history holds is published as recorded (never judged again, never answered twice); a response already
there is ours from before a restart when the history holds its verdict, else forged. On every rescan
the asks this node holds unanswered are checked against a listing of `responses/` (`is_forged`).
What to do with the record is the inbox door's (`core.serving.pipeline`); this module only decides and
does the disk and history work.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from core.seams import Seams, retrying
from core.serving.intake import Intake
from core.serving.records import AWAITING, AskRecord
from core.serving.sessions import ServedSession
from core.serving.verdicts import Ledger, VerdictRow, WrittenMark
from core.text import log_safe
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.request import ParsedRequest
from core.wire.response import ForwardedResponse

log = logging.getLogger("pi_authorizer.serve")

EarlierKind = Literal["forged", "answered", "consumed", "unpublished"]

#: A verdict recorded this soon after the machine's start (by the wall clock, which may be stepped
#: at boot) is taken as possibly recorded before it.
BOOT_SLOP_S = 120.0


@dataclass(frozen=True)
class Earlier:
    """What was left for a request before this node judged it:

    - `forged`: a response is there that no verdict of this node's history accounts for;
    - `answered`: an earlier run published its recorded verdict and stopped before removing the request;
    - `consumed`: its recorded verdict was published, or its row ended (its child read it or gave up,
      whatever a crash left unnoted): a used id is never answered twice;
    - `unpublished`: a verdict was recorded and never made visible: it is published as recorded.
    """

    kind: EarlierKind
    request_id: str
    recorded: VerdictRow | None = None


class Reconcile:
    """Restart reconciliation and forgery detection for the sessions served."""

    def __init__(self, ledger: Ledger | None, seams: Seams) -> None:
        self.ledger, self.seams = ledger, seams

    def earlier(self, parsed: ParsedRequest, intake: Intake, never_placed: bool = False) -> Earlier | None:
        """What an earlier run (or someone else) left for this request; `None`: it is to be judged.
        `never_placed`: this run knows it placed no response for it (its write was refused and it
        waits for the disk): a response cut short is then someone else's, never a power cut's."""
        request_id = parsed.request.id
        recorded = intake.recorded.get(request_id)
        name = f"{request_id}.json"
        if name in intake.responses:
            cut_short_may_be_ours = not never_placed and self._restarted_since(recorded)
            ours = name in (intake.ours if cut_short_may_be_ours else intake.exact)
            if recorded is None or self.ledger is None or not ours:
                return Earlier("forged", request_id)  # not the bytes this node recorded: not its answer
            return Earlier("answered", request_id, recorded)
        if recorded is not None:
            used = recorded.written or recorded.ended
            return Earlier("consumed" if used else "unpublished", request_id, recorded)
        return None

    def _restarted_since(self, recorded: VerdictRow | None) -> bool:
        """Whether the machine may have started again since `recorded` was recorded: only a power cut
        (or a crash of the machine) leaves a response cut short; a killed process leaves every byte it
        linked in the page cache, so after a mere restart of serve a response cut short is someone
        else's (campaign5). Unknown times (a history without them, a kernel that does not say, a
        verdict recorded within `BOOT_SLOP_S` of the start) count as a restart."""
        booted = self.seams.booted_at()
        if booted is None or recorded is None or recorded.decided_at is None:
            return True
        return recorded.decided_at < booted + BOOT_SLOP_S

    async def note_written(self, key: AskKey, earlier: Earlier) -> None:
        """An earlier run's response is visible: the history says so (if it did not yet)."""
        assert self.ledger is not None and earlier.recorded is not None
        if not earlier.recorded.written:
            await self.mark(key, earlier.request_id, True)

    async def publish(self, served: ServedSession, earlier: Earlier, name: str) -> bool:
        """Write the recorded verdict's exact bytes as the response (never replacing one); whether it was.
        Raises `RequestGone` when the request file `name` is gone just before the response would be
        placed (a pi child deletes its response, then its request: a restart reading in between)."""
        recorded = earlier.recorded
        assert recorded is not None
        return await retrying(
            self.seams,
            "publishing a recorded verdict",
            lambda: served.inbox.write_response(earlier.request_id, recorded.body, awaited=name),
        )

    async def mark(self, key: AskKey, request_id: str, written: bool) -> None:
        """The history notes it (retried); a history that still cannot is logged, never a reason to set
        the request aside: a restart notes it from the response file itself."""
        ledger = self.ledger
        assert ledger is not None
        try:
            await retrying(self.seams, "noting a written response",
                           lambda: ledger.mark_written([WrittenMark(key, request_id, written)]))
        except (OSError, sqlite3.OperationalError) as exc:
            log.error("noting the response of %s in the history failed: %s", log_safe(request_id), exc)

    def answered(self, key: AskKey, parsed: ParsedRequest | None, recorded: VerdictRow) -> ServeEvent:
        """The `answered` event of a recorded verdict just published, as of any answer."""
        try:
            response: ForwardedResponse | None = ForwardedResponse.model_validate_json(recorded.body)
        except ValidationError:  # bytes an older version recorded: the answer is still reported
            response = None
        return ServeEvent("answered", key, self.seams.clock.wall(), parsed, response, recorded.outcome)

    async def responses(self, served: ServedSession) -> frozenset[str] | None:
        """The names in `responses/` now (None when it cannot be listed)."""
        try:
            return frozenset(await asyncio.to_thread(served.inbox.list_response_names))
        except OSError:
            return None


def awaiting(records: Iterable[AskRecord]) -> list[AskRecord]:
    """The asks awaiting this node's decision (being judged, or at the terminal), before a listing."""
    return [record for record in records if record.state in AWAITING]


def is_forged(record: AskRecord, responses: frozenset[str]) -> bool:
    """Whether `record`'s response in a listing taken since is someone else's. Its state is read now,
    after the listing: an answer of ours may have been published meanwhile (ours never writes a
    response while the ask awaits its decision)."""
    return (
        record.state in AWAITING
        and record.parsed is not None
        and f"{record.parsed.request.id}.json" in responses
    )
