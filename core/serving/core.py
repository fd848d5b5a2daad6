"""The serving loop: drain each served inbox, judge, escalate what is left, answer exactly once.

Per request: read (hostile-safe) → validate → recorded authority → chain → terminal slot →
publisher. Unlike the reference, one undecided ask never blocks the inbox: rule-decided asks keep
flowing while a person (or a slow chain link) thinks, and every session is rescanned as soon as
inotify says it changed. What a rescan finds is read in one trip off the event loop and served
together, so the answers ready at once share one group commit (`core.publishing`).

The stages: intake (`core.serving.intake`), the judgment (`core.serving.judgment`), escalation
(the chain, then the terminal slot), the publisher (`core.publishing`); events go out as
`core.serving.events.ServeEvent`; the sessions served are `core.serving.sessions`.

Size: over 250 lines while the loop still holds each ask's bookkeeping (tracked states, the answer
callback, restart reconciliation): one state record per ask is the next split.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path

from core.asks import DEFAULT_FORWARDING_TIMEOUT_MS, Answered, Ask, AskKey, Judgment, TerminalSlot
from core.clock import SYSTEM_CLOCK, Clock
from core.files import DISK, DiskWriter
from core.logline import log_safe
from core.publishing import (
    RETRY_DELAYS_S,
    FaultHook,
    Ledger,
    Published,
    Publisher,
    RecordedVerdict,
    VerdictRecord,
    WrittenMark,
    gate_denial,
    no_fault,
)
from core.quarantine import Quarantine
from core.serving.events import Observer, ServeEvent
from core.serving.intake import INTAKE_FILES, Intake, Read, rejection, scan, take_in
from core.serving.judgment import Chain, Judge, NoRecordedAuthority, judge_ask, review_by_chain
from core.serving.sessions import ServedSession, ServedSessions, Sessions
from core.serving.setaside import SetAside, label, retrying
from core.tree import Anchor, UnsafeFolder
from core.watch import watch_session_folders
from core.wire.request import ParsedRequest
from core.wire.response import ForwardedResponse, encode_response

log = logging.getLogger("pi_authorizer.serve")

SAFETY_RESCAN_S = 1.0
#: After a failing loop step, wait this long before the step runs again (no hot error loop).
STEP_FAILURE_PAUSE_S = 1.0
#: At shutdown, how long the files already taken in may take to be served to the end.
SHUTDOWN_GRACE_S = 10.0
class ServingCore:
    """Serves a set of sessions under one forwarding root until `stop()`."""

    def __init__(
        self,
        forwarding_root: Path,
        state_dir: Path,
        terminal: TerminalSlot,
        judge: Judge | None = None,
        chain: Chain | None = None,
        timeout_ms: Callable[[], int] = lambda: DEFAULT_FORWARDING_TIMEOUT_MS,
        force_polling: bool = False,
        ledger: Ledger | None = None,
        clock: Clock = SYSTEM_CLOCK,
        retry_delays: Sequence[float] = RETRY_DELAYS_S,
        writer: DiskWriter = DISK,
        fault: FaultHook = no_fault,
    ) -> None:
        """`fault` is a test seam: called at each stage of every published batch (`BATCH_STAGES`)."""
        self.root = forwarding_root
        self.state_dir = state_dir
        self.terminal = terminal
        self.judge: Judge = judge or NoRecordedAuthority()
        self.chain = chain
        self.timeout_ms = timeout_ms
        self.force_polling = force_polling
        self.ledger = ledger
        self.clock = clock
        self.retry_delays = tuple(retry_delays)
        self.writer = writer
        self.publisher = Publisher(
            ledger, writer, clock, retry_delays, fault, on_published=self._published, on_removed=self._removed
        )
        self.tree = Anchor(forwarding_root, "forwarding root")
        self.state_tree = Anchor(state_dir, "state dir")
        self.quarantine = Quarantine(state_dir, anchor=self.state_tree)
        self._observers: list[Observer] = []
        self.roster = Sessions(
            forwarding_root, state_dir, self.tree, self.state_tree, writer, clock, self._emit
        )
        self.set_aside = SetAside(
            self.quarantine, self.roster, self._emit, clock, retry_delays, keeps_history=ledger is not None
        )
        self.sessions = self.roster.by_id
        #: What a front end may see and do of the sessions served (`core.serving.sessions`).
        self.served: ServedSessions = self.roster
        self._by_folder = self.roster.by_folder
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._serving: set[asyncio.Task[None]] = set()
        self._background: list[Callable[[asyncio.Event], Coroutine[object, object, None]]] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> None:
        """Add an observer; folders already refused (found by `add_session`) are reported to it at once."""
        self._observers.append(observer)
        for served in self.sessions.values():
            for event in served.problems.values():
                observer(event)

    def add_background(self, task: Callable[[asyncio.Event], Coroutine[object, object, None]]) -> None:
        """A coroutine to run alongside serving, given the stop event (config watching...)."""
        self._background.append(task)

    def add_session(self, raw_id: str) -> ServedSession:
        """Take a session: lock it, publish the heartbeat. Raises `SessionHeld` if served elsewhere."""
        served, new = self.roster.add(raw_id)
        if new and self._tasks:
            self._spawn(self.rescan(served))
        return served

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Serve until `stop()`; on exit heartbeats are removed and locks released."""
        try:
            self._spawn(self.roster.heartbeat_loop(self._stop))
            self._spawn(self._watch_loop())
            self._spawn(self._safety_rescan_loop())
            for background in self._background:
                self._spawn(background(self._stop))
            try:
                self.quarantine.prune()
            except OSError as exc:
                log.warning("pruning the quarantine failed: %s", exc)
            await self.rescan_all()
            await self._stop.wait()
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        self._stop.set()
        current = asyncio.current_task()
        pending = [t for t in self._tasks if t is not current]
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._serving:
            # Files already taken in are served to the end (answered, or handed to their terminal).
            _, late = await asyncio.wait(self._serving, timeout=SHUTDOWN_GRACE_S)
            for task in late:
                task.cancel()
        await self.publisher.close()
        self.roster.release()
        self.tree.close()
        self.state_tree.close()

    def _spawn(self, coro: Coroutine[object, object, None], serving: bool = False) -> None:
        """Run `coro` alongside; a `serving` one (a file being served) is let finish at shutdown."""
        task = asyncio.ensure_future(coro)
        (self._serving if serving else self._tasks).add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._serving.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("serving task failed", exc_info=task.exception())

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    async def _watch_loop(self) -> None:
        """Supervised: a failing watcher is logged with its traceback and started again."""
        while not self._stop.is_set():
            try:
                async for folders in watch_session_folders(
                    self.root, self._stop, self.force_polling, self.tree, self._settled
                ):
                    targets = (
                        list(self.sessions.values())
                        if not folders
                        else [s for f in folders if (s := self._by_folder.get(f))]
                    )
                    for served in targets:
                        await self.rescan(served)
            except Exception:
                log.error("watching the forwarding root failed; restarting the watch", exc_info=True)
                await self._pause(STEP_FAILURE_PAUSE_S)

    def _settled(self, folder: str, name: str) -> bool:
        """An answered request was removed (by us, or by its child): forget it without a rescan."""
        served = self._by_folder.get(folder)
        if served is None or served.tracked.get(name) != "answered":
            return False
        self._forget(served, name)
        return True

    def _published(self, key: AskKey, published: Published) -> None:
        """An answer's batch is done: a visible answer is answered at once, before its request goes."""
        served = self.sessions.get(key.session_id)
        if served is None or served.tracked.get(key.name) != "answering" or published.write_failed:
            return
        served.tracked[key.name] = "answered"
        if published.written:
            served.settling[key.name] = published

    def _removed(self, gone: Sequence[tuple[AskKey, Published]]) -> None:
        """The publisher removed these answered requests: their names are free for new requests (each
        only if it still stands for that answer: a removal seen first by the watcher already freed it)."""
        for key, published in gone:
            served = self.sessions.get(key.session_id)
            if served is not None and served.settling.get(key.name) is published:
                del served.settling[key.name]
                if served.tracked.get(key.name) == "answered":
                    self._forget(served, key.name)

    async def _safety_rescan_loop(self) -> None:
        while not self._stop.is_set():
            await self._pause(SAFETY_RESCAN_S)
            try:
                await self.rescan_all()
            except Exception:
                log.error("a safety rescan failed; the next one runs as usual", exc_info=True)

    # -- draining -------------------------------------------------------------------------------

    async def rescan_all(self) -> None:
        for served in list(self.sessions.values()):
            await self.rescan(served)

    async def rescan(self, served: ServedSession) -> None:
        """Diff the inbox listing against what we track: new files are served, vanished ones withdrawn.

        Never raises: one file's failure quarantines that file, a listing failure marks the session
        unservable (heartbeat removed) until listing works again.
        """
        async with served.scan_lock:
            try:
                await self._drain(served)
            except UnsafeFolder as exc:
                self.roster.report_unsafe(served, "inbox", exc, "this session's requests are not served")
                self.roster.set_unservable(served, f"a folder of its inbox is refused: {exc}")
                return
            self.roster.clear_unsafe(served, "inbox")

    async def _drain(self, served: ServedSession) -> None:
        """One pass over the inbox; raises `UnsafeFolder` when a folder of the session tree is refused."""
        known = frozenset(served.tracked)
        try:
            # One trip off the loop lists the inbox and reads the first batch of new files, so a burst
            # is judged, recorded and published together (and a single ask pays one trip).
            names, intake = await asyncio.to_thread(scan, served.inbox, known, self.ledger)
        except UnsafeFolder:
            raise
        except Exception as exc:
            self.roster.set_unservable(served, f"its inbox cannot be listed: {exc}")
            return
        self.roster.set_unservable(served, None)
        present = set(names)
        for name in list(served.tracked):
            if name not in present:
                self._forget(served, name)
        await self._detect_forgeries(served)
        new = [name for name in names if name not in known]
        while intake is not None:
            await self._serve_batch(served, intake)
            new = new[len(intake.reads) :]
            if not new:
                break
            intake = await asyncio.to_thread(take_in, served.inbox, new[:INTAKE_FILES], self.ledger)

    async def _serve_batch(self, served: ServedSession, intake: Intake) -> None:
        """Serve the files of one intake concurrently: their answers join one batch of the publisher.

        Returns once each has been judged and handed on (not published): the next intake is judged
        while this batch is being committed, and waits only when the publisher is a batch behind.
        """
        for name, read in intake.reads:
            if name not in served.tracked:
                served.tracked[name] = "processing"
                self._spawn(self._serve_file(served, name, read, intake), serving=True)
        await asyncio.sleep(0)  # each runs up to its answer, or into its terminal
        await self.publisher.room()

    def _forget(self, served: ServedSession, name: str) -> None:
        served.settling.pop(name, None)
        state = served.tracked.pop(name)
        ask = served.asks.pop(name, None)
        if state in {"pending", "left", "processing"}:
            key = AskKey(served.inbox.session_id, name)
            if ask is not None:
                ask.withdrawn = True
            self.terminal.withdraw(key)
            self._emit(ServeEvent("withdrawn", key, self.clock.wall(), parsed=ask.parsed if ask else None))
            log.info(
                "%s withdrawn by the child before an answer", label(key, ask.parsed if ask else None)
            )

    async def _serve_file(self, served: ServedSession, name: str, read: Read, intake: Intake) -> None:
        """Serve one file; whatever goes wrong, it is quarantined with the reason and serving goes on."""
        try:
            await self._serve_unguarded(served, name, read, intake)
        except UnsafeFolder as exc:
            # The session tree is refused, not this file: reported, served once it is sound.
            if served.tracked.get(name) == "processing":
                del served.tracked[name]
            self.roster.report_unsafe(served, "inbox", exc, "this session's requests are not served")
        except Exception as exc:
            key = AskKey(served.inbox.session_id, name)
            log.error("%s: serving failed", label(key, None), exc_info=True)
            ask = served.asks.pop(name, None)
            if ask is not None and not ask.withdrawn:
                ask.withdrawn = True
                self.terminal.withdraw(key)
            reason = f"serving this file failed ({type(exc).__name__}: {exc})"
            await self.set_aside.reject(served, name, reason, None)

    async def _serve_unguarded(self, served: ServedSession, name: str, read: Read, intake: Intake) -> None:
        key = AskKey(served.inbox.session_id, name)
        if read.gone:
            served.tracked.pop(name, None)
            return
        reason = rejection(name, read, served.inbox.session_id)
        if reason is not None or read.parsed is None:
            await self.set_aside.reject(served, name, reason or "unusable request", read.raw)
            return
        parsed = read.parsed
        request = parsed.request
        recorded = intake.recorded.get(request.id)
        if f"{request.id}.json" in intake.responses:
            await self._response_already_there(served, name, parsed, recorded)
            return
        if recorded is not None:
            await self._reconcile(served, name, parsed, recorded)
            return
        now = self.clock.wall()
        self._emit(ServeEvent("arrived", key, now, parsed=parsed, raw=read.raw))
        ask = Ask(
            key=key,
            parsed=parsed,
            judgment=Judgment(verdict="ask"),
            arrived_at=now,
            timeout_ms=self.timeout_ms(),
            answer_with=lambda response, outcome: self._answer(served, name, response, outcome),
            responder_session_id=served.inbox.session_id,
        )
        served.asks[name] = ask
        ask.judgment, decision = judge_ask(self.judge, parsed, served.inbox.session_id, self.clock)
        if decision is not None:
            await ask.answer(decision.response, decision.outcome)
            return
        if self.chain is not None:
            self._spawn(self._after_chain(served, ask))
        else:
            await self._to_terminal(served, ask)

    async def _after_chain(self, served: ServedSession, ask: Ask) -> None:
        assert self.chain is not None
        named = label(ask.key, ask.parsed)
        reviewed = await review_by_chain(self.chain, ask.parsed, served.inbox.session_id, self.clock, named)
        if ask.withdrawn:
            return
        if reviewed is not None:
            ask.judgment, decision = reviewed
            await ask.answer(decision.response, decision.outcome)
            return
        await self._to_terminal(served, ask)

    async def _to_terminal(self, served: ServedSession, ask: Ask) -> None:
        if served.tracked.get(ask.key.name) == "processing":
            served.tracked[ask.key.name] = "pending"
        await self.terminal.receive(ask)
        if ask.outcome == "left" and served.tracked.get(ask.key.name) == "pending":
            served.tracked[ask.key.name] = "left"
            self._emit(ServeEvent("left", ask.key, self.clock.wall(), parsed=ask.parsed))
            log.info("%s left for another authorizer", label(ask.key, ask.parsed))

    async def _response_already_there(
        self, served: ServedSession, name: str, parsed: ParsedRequest, recorded: RecordedVerdict | None
    ) -> None:
        """A response exists before this node answered: ours from before a restart, or a forgery."""
        key = AskKey(served.inbox.session_id, name)
        request_id = parsed.request.id
        if recorded is not None and self.ledger is not None:
            # An earlier run died between answering and deleting the request: it is answered.
            served.tracked[name] = "answered"
            if not recorded.written:
                await asyncio.to_thread(self.ledger.mark_written, [WrittenMark(key, request_id, True)])
            await self._remove_request(served, name)
            log.info(
                "%s was answered by this node before a restart; request removed", label(key, parsed)
            )
            return
        await self.set_aside.forged(served, name, parsed, "before this node served the request")

    async def _detect_forgeries(self, served: ServedSession) -> None:
        """A response for an ask this node still holds was written by someone else: report it."""
        held = [
            n
            for n, state in served.tracked.items()
            if state in {"pending", "processing"} and n in served.asks
        ]
        if not held:
            return
        try:
            responses = set(await asyncio.to_thread(served.inbox.list_response_names))
        except OSError:
            return
        for name in held:
            # Read again after the listing: an answer of ours may have been published meanwhile.
            if served.tracked.get(name) not in {"pending", "processing"}:
                continue
            ask = served.asks.get(name)
            if ask is not None and f"{ask.request.id}.json" in responses and not ask.withdrawn:
                ask.withdrawn = True
                served.asks.pop(name, None)
                self.terminal.withdraw(ask.key)
                when = "while the ask waited for this node's verdict"
                await self.set_aside.forged(served, name, ask.parsed, when)

    async def _reconcile(
        self, served: ServedSession, name: str, parsed: ParsedRequest, recorded: RecordedVerdict
    ) -> None:
        """A verdict an earlier run recorded: publish it (once) instead of judging again."""
        assert self.ledger is not None
        ledger = self.ledger
        request_id = parsed.request.id
        key = AskKey(served.inbox.session_id, name)
        if recorded.written:
            # Answered, and the response already consumed: a request under a used id is never
            # answered a second time.
            reason = f"request id {request_id!r} was already answered by this node; not answered twice"
            await self.set_aside.reject(served, name, reason, parsed.raw, answer=False)
            return
        served.tracked[name] = "answered"
        written = await retrying(self.retry_delays,
            "publishing a recorded verdict", lambda: served.inbox.write_response(request_id, recorded.body)
        )
        await asyncio.to_thread(ledger.mark_written, [WrittenMark(key, request_id, written)])
        log.info("%s recorded verdict published after a restart", label(key, None))
        await self._remove_request(served, name)

    async def _remove_request(self, served: ServedSession, name: str) -> None:
        """Delete an answered request; once gone, its name is free for a new request."""
        await asyncio.to_thread(served.inbox.delete_request, name)
        if served.tracked.get(name) == "answered":
            del served.tracked[name]

    def _gate_denial(self, served: ServedSession, reason: str) -> ForwardedResponse:
        """A denial no person made, with the reason the child passes on to its agent."""
        return gate_denial(served.inbox.session_id, self.clock, reason)

    async def _answer(
        self, served: ServedSession, name: str, response: ForwardedResponse, outcome: str
    ) -> Answered:
        """Recorded (durable), published once, in the batch ready with it; the publisher then deletes
        the request (the reference's order)."""
        key = AskKey(served.inbox.session_id, name)
        ask = served.asks.get(name)
        state = served.tracked.get(name)
        if state is None or ask is None or ask.withdrawn:
            return Answered(False, "the child withdrew this request")
        if state in {"answered", "answering"}:
            return Answered(False, "this request was already answered")
        served.tracked[name] = "answering"
        verdict = VerdictRecord(key, ask.parsed, response, encode_response(response), outcome)
        published = await self.publisher.publish(served.inbox, verdict)
        response, outcome = published.verdict.response, published.verdict.outcome
        if published.write_failed is not None:
            error = published.write_failed
            log.error("%s: writing the response failed: %s", label(key, ask.parsed), error)
            self._emit(ServeEvent("answer_failed", key, self.clock.wall(), parsed=ask.parsed, reason=error))
            if outcome == "user":
                if served.tracked.get(name) == "answering":
                    served.tracked[name] = state  # the person's ask stays pending, in its place
                return Answered(False, f"writing the response failed: {error}", gone=False)
            # Forget it: the next rescan serves it again (a recorded verdict is published as is).
            if served.tracked.get(name) == "answering":
                served.tracked.pop(name, None)
            served.asks.pop(name, None)
            return Answered(False, f"writing the response failed: {error}", gone=False)
        served.asks.pop(name, None)
        ask.outcome = outcome
        if not published.written:
            when = "before this node's verdict could be written"
            await self.set_aside.forged(served, name, ask.parsed, when)
            return Answered(False, "a response this node did not write was already there")
        now = self.clock.wall()
        self._emit(ServeEvent("answered", key, now, parsed=ask.parsed, response=response, outcome=outcome))
        log.info("%s %s", label(key, ask.parsed), _describe(response, outcome, ask, now))
        if published.history_failed is not None:
            return Answered(False, f"{published.history_failed}; the child was denied for safety")
        return Answered(True)

    def _emit(self, event: ServeEvent) -> None:
        for observer in list(self._observers):
            try:
                observer(event)
            except Exception:
                log.exception("observer failed on %s", event.kind)


def _describe(response: ForwardedResponse, outcome: str, ask: Ask, now: float) -> str:
    source = response.decided_by
    by = source.kind if source is not None else "?"
    reason = f" reason={log_safe(response.denial_reason, 120)}" if response.denial_reason else ""
    waited = (now - ask.arrived_at) * 1000
    return f"-> {response.state} by={by} ({outcome}){reason} in {waited:.1f}ms"
