"""Answering: a decision published once, and what became of it reported from the publisher's side.

`answer()` moves an ask's record to `decided` and hands the verdict to the publisher
(`core.serving.publisher`). The publisher tells `reported()` what became of each answer of a batch, on the
event loop, before anyone waiting on it resumes: the record moves on there (published; back to the
person after a failed write of the person's decision; else `unanswered`, served anew at the next
rescan) and observers hear `answered` or `answer_failed` there, so a serving task cancelled at
shutdown while its batch commits loses no report. An answer not written whose file vanished
meanwhile ends `withdrawn`: its child gave up unanswered. `removed()` frees a name once the
publisher removed its request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence

from core.clock import Clock
from core.disk.writer import DiskWriter
from core.seams import FaultHook
from core.serving.asks import Answered, AskKey, Decision
from core.serving.events import ServeEvent
from core.serving.publisher import Ledger, Published, Publisher, VerdictRecord
from core.serving.records import AWAITING, AskRecord
from core.serving.sessions import ServedSession
from core.serving.setaside import SetAside, label
from core.text import log_safe
from core.wire.response import ForwardedResponse, encode_response

log = logging.getLogger("pi_authorizer.serve")


class Answering:
    """The publisher's stage of serving: owns the `Publisher` and the records' moves it causes."""

    def __init__(
        self,
        sessions: dict[str, ServedSession],
        set_aside: SetAside,
        emit: Callable[[ServeEvent], None],
        clock: Clock,
        ledger: Ledger | None,
        writer: DiskWriter,
        retry_delays: Sequence[float],
        fault: FaultHook,
        spawn: Callable[[Coroutine[object, object, None], bool], object],
    ) -> None:
        self.sessions, self.set_aside, self.emit, self.clock = sessions, set_aside, emit, clock
        self.spawn = spawn
        #: The record of each answer being published, by its request (`id(parsed)`, kept alive here).
        self._answering: dict[int, AskRecord] = {}
        self.publisher = Publisher(
            ledger, writer, clock, retry_delays, fault, on_published=self.reported, on_removed=self.removed
        )

    async def answer(self, served: ServedSession, record: AskRecord, decision: Decision) -> Answered:
        """Recorded (durable), published once, in the batch ready with it; the publisher then deletes
        the request (the reference's order)."""
        if record.stage not in AWAITING:
            return Answered(False, _gone(record))
        parsed = record.parsed
        assert parsed is not None
        published = await asyncio.shield(self._enqueue(served, record, decision))
        if published.write_failed is not None:
            # Still waiting only if its record went back to the person (not if the child withdrew meanwhile).
            waits = record.stage == "shown"
            return Answered(False, f"writing the response failed: {published.write_failed}", gone=not waits)
        if not published.written:
            when = "before this node's verdict could be written"
            await self.set_aside.forged(served, record, parsed, when)
            return Answered(False, "a response this node did not write was already there")
        if published.history_failed is not None:
            return Answered(False, f"{published.history_failed}; the child was denied for safety")
        return Answered(True)

    def answer_soon(self, served: ServedSession, record: AskRecord, decision: Decision) -> None:
        """`answer` for a decision no one waits on (a rule's, the fail-safe's), without a task: what
        became of it is reported as for any answer (`reported`); a response found already there is
        set aside as forged, the one outcome that needs a task."""
        if record.stage not in AWAITING:
            return
        self._enqueue(served, record, decision).add_done_callback(
            lambda done: self._forged_soon(served, record, done)
        )

    def _enqueue(
        self, served: ServedSession, record: AskRecord, decision: Decision
    ) -> asyncio.Future[Published]:
        assert record.parsed is not None
        served.records.move(record, "decided")
        self._answering[id(record.parsed)] = record
        response = decision.response
        body = encode_response(response)
        verdict = VerdictRecord(record.key, record.parsed, response, body, decision.outcome)
        return self.publisher.enqueue(served.inbox, verdict)

    def _forged_soon(self, served: ServedSession, record: AskRecord, done: asyncio.Future[Published]) -> None:
        if done.cancelled() or done.result().write_failed is not None or done.result().written:
            return
        assert record.parsed is not None
        when = "before this node's verdict could be written"
        self.spawn(self.set_aside.forged(served, record, record.parsed, when), True)

    def reported(self, key: AskKey, published: Published) -> None:
        """What became of one answer of a batch: its record moves on, observers are told."""
        verdict = published.verdict
        served = self.sessions.get(key.session_id)
        answering = self._answering.pop(id(verdict.parsed), None)
        record = answering if answering is not None and answering.stage == "decided" else None
        if published.write_failed is not None:
            error = published.write_failed
            log.error("%s: writing the response failed: %s", label(key, verdict.parsed), error)
            failed = ServeEvent("answer_failed", key, self.clock.wall(), parsed=verdict.parsed, reason=error)
            self.emit(failed)
            if served is not None and record is not None:
                if record.vanished:  # its file went while the answer was written: the child gave up
                    served.records.move(record, "withdrawn")
                    self.emit(ServeEvent("withdrawn", key, self.clock.wall(), parsed=verdict.parsed))
                elif verdict.outcome == "user":
                    served.records.move(record, "shown")  # the person's ask stays pending, in its place
                else:
                    served.records.move(record, "unanswered")  # served anew at the next rescan, or withdrawn
            return
        if not published.written:
            return  # a response was already there: `answer` sets the request aside as forged
        if served is not None and record is not None:
            served.records.publish(record, published)
        now = self.clock.wall()
        response, outcome = verdict.response, verdict.outcome
        # With the ledger's refusal as its reason, the history closes the row as fail-safe from it.
        reason = published.history_failed
        self.emit(ServeEvent("answered", key, now, verdict.parsed, response, outcome, reason))
        waited = None if record is None else now - record.arrived_at
        log.info("%s %s", label(key, verdict.parsed), describe(response, outcome, waited))

    def removed(self, gone: Sequence[tuple[AskKey, Published]]) -> None:
        """The publisher removed these answered requests: their names are free for new requests (each
        only if it still stands for that answer: a removal seen first by the watcher already freed it)."""
        for key, published in gone:
            served = self.sessions.get(key.session_id)
            record = served.records.get(key.name) if served is not None else None
            if served is not None and record is not None and record.published is published:
                served.records.release(record)


def _gone(record: AskRecord) -> str:
    if record.stage in ("decided", "published"):
        return "this request was already answered"
    if record.stage == "held":
        return "this request was set aside"
    return "the child withdrew this request"


def describe(response: ForwardedResponse, outcome: str, waited_s: float | None) -> str:
    """The answer's part of its log line: state, who decided, the reason, how long the ask waited."""
    source = response.decided_by
    by = source.kind if source is not None else "?"
    reason = f" reason={log_safe(response.denial_reason, 120)}" if response.denial_reason else ""
    waited = "" if waited_s is None else f" in {waited_s * 1000:.1f}ms"
    return f"-> {response.state} by={by} ({outcome}){reason}{waited}"
