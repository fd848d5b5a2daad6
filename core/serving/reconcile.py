"""A response this node did not just write: an answer of an earlier run (reconciled after a restart),
or a forgery (reported, the request set aside).

`restore()` runs for every request read, before it is judged: a verdict the history holds is
published as recorded (never judged again, never answered twice); a response already there is ours
from before a restart when the history holds its verdict, else forged. `restore_reused()` runs for
an unusable file before it is set aside: a request answered in place is its recorded answer's.
`detect_forgeries()` runs on every rescan for the asks this node holds unanswered. A recorded verdict
published now is reported `answered` like any answer, so observers (the app) hear of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence

from pydantic import ValidationError

from core.serving.asks import Arbiter
from core.serving.events import ServeEvent
from core.serving.intake import FileRead, Intake
from core.serving.publisher import Ledger, RecordedVerdict, WrittenMark
from core.serving.records import AWAITING, AskRecord
from core.serving.sessions import ServedSession
from core.serving.setaside import SetAside, label, retrying
from core.wire.request import ParsedRequest
from core.wire.response import ForwardedResponse

log = logging.getLogger("pi_authorizer.serve")


class Reconcile:
    """Restart reconciliation and forgery detection for the sessions served."""

    def __init__(
        self,
        ledger: Ledger | None,
        retry_delays: Sequence[float],
        set_aside: SetAside,
        arbiter: Arbiter,
        emit: Callable[[ServeEvent], None],
    ) -> None:
        self.ledger, self.retry_delays = ledger, tuple(retry_delays)
        self.set_aside, self.arbiter, self.emit = set_aside, arbiter, emit

    async def restore(
        self, served: ServedSession, record: AskRecord, parsed: ParsedRequest, intake: Intake
    ) -> bool:
        """Whether this request was handled here (answered before, or forged) rather than to be judged."""
        request_id = parsed.request.id
        recorded = intake.recorded.get(request_id)
        if f"{request_id}.json" in intake.responses:
            await self._response_already_there(served, record, parsed, recorded)
            return True
        if recorded is not None:
            await self._republish(served, record, parsed, recorded)
            return True
        return False

    async def _response_already_there(
        self,
        served: ServedSession,
        record: AskRecord,
        parsed: ParsedRequest,
        recorded: RecordedVerdict | None,
    ) -> None:
        """A response exists before this node answered: ours from before a restart, or a forgery."""
        if recorded is None or self.ledger is None:
            await self.set_aside.forged(served, record, parsed, "before this node served the request")
            return
        await self._answered_before(served, record, parsed.request.id, recorded)

    async def restore_reused(
        self, served: ServedSession, record: AskRecord, read: FileRead, intake: Intake
    ) -> bool:
        """Whether this unusable file is a request an earlier run answered in place
        (`core.disk.reused`) and stopped before its request was removed: it holds the start of
        the response recorded for its name. It is that answer's (published once), never set aside."""
        request_id = record.key.name.removesuffix(".json")
        recorded = intake.recorded.get(request_id)
        if recorded is None or read.raw is None or not read.raw.startswith(recorded.body):
            return False
        if recorded.written or f"{request_id}.json" in intake.responses:
            await self._answered_before(served, record, request_id, recorded)
        else:
            await self._publish_recorded(served, record, request_id, recorded, None)
        return True

    async def _answered_before(
        self, served: ServedSession, record: AskRecord, request_id: str, recorded: RecordedVerdict
    ) -> None:
        """An earlier run died between answering and deleting the request: it is answered."""
        assert self.ledger is not None
        served.records.move(record, "published")
        if not recorded.written:
            await asyncio.to_thread(self.ledger.mark_written, [WrittenMark(record.key, request_id, True)])
        await self._remove_request(served, record)
        log.info("%s was answered by this node before a restart; request removed", label(record.key, None))

    async def _republish(
        self, served: ServedSession, record: AskRecord, parsed: ParsedRequest, recorded: RecordedVerdict
    ) -> None:
        """A verdict an earlier run recorded: publish it (once) instead of judging again."""
        assert self.ledger is not None
        request_id = parsed.request.id
        if recorded.written:
            # Answered, and the response already consumed: a request under a used id is never
            # answered a second time.
            reason = f"request id {request_id!r} was already answered by this node; not answered twice"
            await self.set_aside.reject(served, record, reason, parsed.raw, answer=False)
            return
        await self._publish_recorded(served, record, request_id, recorded, parsed)

    async def _publish_recorded(
        self,
        served: ServedSession,
        record: AskRecord,
        request_id: str,
        recorded: RecordedVerdict,
        parsed: ParsedRequest | None,
    ) -> None:
        assert self.ledger is not None
        served.records.move(record, "decided")
        written = await retrying(
            self.set_aside.clock,
            self.retry_delays,
            "publishing a recorded verdict",
            lambda: served.inbox.write_response(request_id, recorded.body),
        )
        served.records.advance(record, "published")
        if written:  # visible now: reported before anything else can fail
            self._answered(record, parsed, recorded)
        await asyncio.to_thread(self.ledger.mark_written, [WrittenMark(record.key, request_id, written)])
        log.info("%s recorded verdict published after a restart", label(record.key, None))
        await self._remove_request(served, record)

    def _answered(self, record: AskRecord, parsed: ParsedRequest | None, recorded: RecordedVerdict) -> None:
        """Observers hear of the recorded verdict just published, once, as of any answer."""
        try:
            response: ForwardedResponse | None = ForwardedResponse.model_validate_json(recorded.body)
        except ValidationError:  # bytes an older version recorded: the answer is still reported
            response = None
        at = self.set_aside.clock.wall()
        self.emit(ServeEvent("answered", record.key, at, parsed, response, recorded.outcome))

    async def _remove_request(self, served: ServedSession, record: AskRecord) -> None:
        """Delete an answered request; once gone, its name is free for a new request."""
        await asyncio.to_thread(served.inbox.delete_request, record.key.name)
        served.records.release(record)

    async def detect_forgeries(self, served: ServedSession) -> None:
        """A response for an ask this node still holds was written by someone else: report it."""
        waiting = awaiting(served.records)
        if not waiting:
            return
        try:
            responses = frozenset(await asyncio.to_thread(served.inbox.list_response_names))
        except OSError:
            return
        for record in waiting:
            if is_forged(record, responses):
                assert record.parsed is not None
                self.arbiter.withdraw(record.key)
                when = "while the ask waited for this node's verdict"
                await self.set_aside.forged(served, record, record.parsed, when)


def awaiting(records: Iterable[AskRecord]) -> list[AskRecord]:
    """The asks awaiting this node's decision (being judged, or at the terminal), before a listing."""
    return [record for record in records if record.stage in AWAITING]


def is_forged(record: AskRecord, responses: frozenset[str]) -> bool:
    """Whether `record`'s response in a listing taken since is someone else's. Its stage is read now,
    after the listing: an answer of ours may have been published meanwhile (ours never writes a
    response while the ask awaits its decision)."""
    return (
        record.stage in AWAITING
        and record.parsed is not None
        and f"{record.parsed.request.id}.json" in responses
    )
