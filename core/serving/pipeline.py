"""The path of one request file, read to answered, as a list of stages:

1. check (`intake.rejection`): unusable, misaddressed → set aside with the reason (`setaside`);
2. restore (`reconcile`): answered by an earlier run, or a response someone else wrote;
3. judge (`judgment.judge_ask`): this node's rules; a decision is answered at once;
4. escalate (`judgment.review_by_chain`): the chain's links, off the serving task;
5. the terminal slot (`core.serving.asks`): its decision is a value; the person's arrives later, when taken;
6. answer (`answering`): recorded and published once by the publisher.

Each step moves the file's record (`records`); one that ended meanwhile (the child withdrew) stops the
path. Whatever goes wrong, the file is quarantined with the reason and serving goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine

from core.disk.tree import UnsafeFolder
from core.forwarding.inbox import UnreadableRequest
from core.serving.answering import Answering
from core.serving.asks import Answered, ArbiterDecision, Ask, Decision, Leave
from core.serving.events import ServeEvent
from core.serving.intake import FileRead, Intake, rejection
from core.serving.judgment import Chain, Judge, judge_ask, review_by_chain
from core.serving.records import AskRecord
from core.serving.sessions import ServedSession
from core.serving.setaside import SetAside, label
from core.serving.shared import Shared
from core.wire.request import ParsedRequest

log = logging.getLogger("pi_authorizer.serve")

#: What a person's decision call learns when serving ended (shutdown, a failure) before it knew.
UNSERVED = Answered(False, "serving ended before what became of this decision was known")
#: What a person's decision call learns when the request file no longer holds the ask decided.
CHANGED = Answered(False, "the request was withdrawn or replaced by another before this decision was written")
#: What it learns when the request's folder cannot be read (moved away, refused): the ask waits again.
AWAY = Answered(False, "the request's folder cannot be read now; decide again once it is back", gone=False)


class Pipeline:
    """The stages one request file goes through, wired once per serving core."""

    def __init__(
        self,
        shared: Shared,
        judge: Judge,
        chain: Chain | None,
        timeout_ms: Callable[[], int],
        set_aside: SetAside,
        answering: Answering,
    ) -> None:
        self.shared, self.judge, self.chain, self.timeout_ms = shared, judge, chain, timeout_ms
        self.set_aside, self.answering = set_aside, answering

    def start(self, served: ServedSession, record: AskRecord, read: FileRead, intake: Intake) -> None:
        """Serve one file of an intake: the common case at once, without a task of its own (a burst
        of 10,000 would pay 10,000 tasks); any other in a task that runs the whole path."""
        try:
            if self._serve_now(served, record, read, intake):
                return
        except Exception as exc:
            self.shared.spawn(self._failed(served, record, exc), True)
            return
        self.shared.spawn(self.serve(served, record, read, intake), True)

    def _serve_now(self, served: ServedSession, record: AskRecord, read: FileRead, intake: Intake) -> bool:
        """The path of a usable request with nothing to restore, decided at once (by a rule, or a
        terminal that decides on the spot and waits for no reply) and handed to the publisher.
        False, having changed nothing: the file needs `serve` (set aside, restored, or it waits)."""
        parsed = read.parsed
        if not record.live or read.gone or parsed is None:
            return False
        request_id = parsed.request.id
        if f"{request_id}.json" in intake.responses or request_id in intake.recorded:
            return False
        if rejection(record.key.name, read, served.inbox.session_id) is not None:
            return False
        now = self.shared.clock.wall()
        served.records.arrive(record, parsed, now)
        self.shared.emit(ServeEvent("arrived", record.key, now, parsed=parsed, raw=read.raw))
        judgment, decision = judge_ask(self.judge, parsed, served.inbox.session_id, self.shared.clock)
        if decision is not None:
            self.answering.answer_soon(served, record, decision)
            return True
        served.records.move(record, "judged")
        ask = Ask(record.key, parsed, judgment, now, self.timeout_ms(), served.inbox.session_id)
        if self.chain is not None:
            self.shared.spawn(self._guarded(served, record, self._escalate(served, record, ask)), False)
            return True
        served.records.move(record, "shown")
        pending = self.shared.arbiter.decide(ask)
        taken = pending.result() if pending.done() and not pending.cancelled() else None
        if isinstance(taken, Decision) and taken.reply is None and taken.outcome != "user":
            self.answering.answer_soon(served, record, taken)
        else:
            self._when_decided(served, record, ask, pending)  # taken in a task, done or not
        return True

    async def serve(self, served: ServedSession, record: AskRecord, read: FileRead, intake: Intake) -> None:
        await self._guarded(served, record, self._serve(served, record, read, intake))

    async def _serve(self, served: ServedSession, record: AskRecord, read: FileRead, intake: Intake) -> None:
        if not record.live:
            return  # withdrawn before its turn
        if read.gone:
            served.records.release(record)
            return
        if read.parsed is None and await self.shared.reconcile.restore_reused(served, record, read, intake):
            return
        parsed = await self._checked(served, record, read)
        if parsed is None or await self.shared.reconcile.restore(served, record, parsed, intake):
            return
        now = self.shared.clock.wall()
        served.records.arrive(record, parsed, now)
        self.shared.emit(ServeEvent("arrived", record.key, now, parsed=parsed, raw=read.raw))
        judgment, decision = judge_ask(self.judge, parsed, served.inbox.session_id, self.shared.clock)
        if decision is not None:
            await self.answering.answer(served, record, decision)
            return
        served.records.move(record, "judged")
        ask = Ask(record.key, parsed, judgment, now, self.timeout_ms(), served.inbox.session_id)
        if self.chain is not None:
            self.shared.spawn(self._guarded(served, record, self._escalate(served, record, ask)), False)
        else:
            await self._to_terminal(served, record, ask)

    async def _checked(
        self, served: ServedSession, record: AskRecord, read: FileRead
    ) -> ParsedRequest | None:
        """The request, or None when it is set aside as unusable (its child answered with the reason)."""
        reason = rejection(record.key.name, read, served.inbox.session_id)
        if reason is not None or read.parsed is None:
            await self.set_aside.reject(served, record, reason or "unusable request", read.raw)
            return None
        return read.parsed

    async def _escalate(self, served: ServedSession, record: AskRecord, ask: Ask) -> None:
        assert self.chain is not None
        named = label(ask.key, ask.parsed)
        clock = self.shared.clock
        reviewed = await review_by_chain(self.chain, ask.parsed, ask.responder_session_id, clock, named)
        if record.stage != "judged":
            return  # withdrawn, or set aside as forged, while the chain reviewed it
        if reviewed is not None:
            await self.answering.answer(served, record, reviewed[1])
        else:
            await self._to_terminal(served, record, ask)

    async def _to_terminal(self, served: ServedSession, record: AskRecord, ask: Ask) -> None:
        served.records.move(record, "shown")
        pending = self.shared.arbiter.decide(ask)
        if pending.done():
            await self._decided(served, record, ask, pending)
        else:
            self._when_decided(served, record, ask, pending)

    def _when_decided(
        self, served: ServedSession, record: AskRecord, ask: Ask, pending: asyncio.Future[ArbiterDecision]
    ) -> None:
        """A decision still to come (a person thinks): taken as a file being served once it is made;
        nothing waits meanwhile. A withdrawn ask's decision is cancelled: nothing is taken then."""

        def taken(done: asyncio.Future[ArbiterDecision]) -> None:
            if done.cancelled():
                return
            decided = self._decided(served, record, ask, done)
            task = self.shared.spawn(self._guarded(served, record, decided), True)
            decision = done.result()
            reply = decision.reply if isinstance(decision, Decision) else None
            if reply is not None:  # whatever ends the task (a failure, shutdown), the person learns it
                task.add_done_callback(lambda _: _settle(reply, UNSERVED))

        pending.add_done_callback(taken)

    async def _decided(
        self, served: ServedSession, record: AskRecord, ask: Ask, done: asyncio.Future[ArbiterDecision]
    ) -> None:
        decision = done.result()
        if isinstance(decision, Leave):
            if served.records.advance(record, "left"):
                self.shared.emit(ServeEvent("left", ask.key, self.shared.clock.wall(), parsed=ask.parsed))
                log.info("%s left for another authorizer", label(ask.key, ask.parsed))
            return
        unasked = None if decision.reply is None else await self._unasked(served, record, ask)
        if decision.reply is not None and unasked is not None:
            if not unasked.gone:  # its inbox cannot be read now: the ask waits in its place
                self._when_decided(served, record, ask, self.shared.arbiter.decide(ask))
            _settle(decision.reply, unasked)
            return
        answered = await self.answering.answer(served, record, decision)
        if record.stage == "shown":  # the person's decision could not be written: asked again
            self._when_decided(served, record, ask, self.shared.arbiter.decide(ask))
        if decision.reply is not None:
            _settle(decision.reply, answered)

    async def _unasked(self, served: ServedSession, record: AskRecord, ask: Ask) -> Answered | None:
        """None when the request file still holds the ask the person decided. One replaced, rewritten or
        withdrawn meanwhile is not that ask (`CHANGED`); it ends withdrawn, and the inbox is listed again
        at once: a file rewritten in place while it was shown raised its file event before, so none is
        coming. An inbox that cannot be listed now (moved away, refused) withdraws nothing (`AWAY`)."""
        try:
            raw = await asyncio.to_thread(served.inbox.read_request, record.key.name)
        except (FileNotFoundError, UnreadableRequest, UnsafeFolder):
            raw = None
        away = raw is None and not await asyncio.to_thread(served.inbox.listable)
        if raw == ask.parsed.raw or record.stage != "shown":
            return None  # unchanged, or ended meanwhile (answering says so)
        if away:
            return AWAY
        served.records.vanish(record.key.name)
        self.shared.emit(ServeEvent("withdrawn", record.key, self.shared.clock.wall(), parsed=ask.parsed))
        log.warning("%s changed or withdrawn before the decision was written", label(record.key, ask.parsed))
        self.shared.spawn(self.shared.rescan(served), False)
        return CHANGED

    async def _guarded(
        self, served: ServedSession, record: AskRecord, step: Coroutine[object, object, None]
    ) -> None:
        """Run a step of the path; whatever goes wrong, the file is quarantined with the reason."""
        try:
            await step
        except Exception as exc:
            await self._failed(served, record, exc)

    async def _failed(self, served: ServedSession, record: AskRecord, exc: Exception) -> None:
        """A step of the path raised: the file is quarantined with the reason (a refused session
        tree is reported instead, and the file served once the tree is sound)."""
        if isinstance(exc, UnsafeFolder):
            self._leave_terminal(record)
            served.records.release(record)
            self.shared.roster.report_unsafe(served, "inbox", exc, "this session's requests are not served")
            return
        log.error("%s: serving failed", label(record.key, None), exc_info=exc)
        if not record.live:
            return  # its file is gone (withdrawn, or answered and removed): nothing to set aside
        self._leave_terminal(record)
        reason = f"serving this file failed ({type(exc).__name__}: {exc})"
        await self.set_aside.reject(served, record, reason, None)

    def _leave_terminal(self, record: AskRecord) -> None:
        if record.stage == "shown":
            self.shared.arbiter.withdraw(record.key)


def _settle(reply: asyncio.Future[Answered], answered: Answered) -> None:
    if not reply.done():
        reply.set_result(answered)
