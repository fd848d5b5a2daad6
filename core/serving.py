"""The serving core: drain each served inbox, judge, escalate what is left, answer exactly once.

Per request: read (hostile-safe) → validate → recorded authority → chain → terminal slot →
publisher. Unlike the reference, one undecided ask never blocks the inbox: rule-decided asks keep
flowing while a person (or a slow chain link) thinks, and every session is rescanned as soon as
inotify says it changed. What a rescan finds is read in one trip off the event loop and served
together, so the answers ready at once share one group commit (`core.publishing`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from core.asks import DEFAULT_FORWARDING_TIMEOUT_MS, Answered, Ask, AskKey, Judgment, TerminalSlot
from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.inbox import SessionInbox, UnreadableRequest, display_name, read_request_in
from core.liveness import (
    HEARTBEAT_INTERVAL_S,
    Heartbeat,
    SessionHeld,
    SessionLock,
    live_foreign_server,
    pid_alive,
)
from core.logline import log_safe
from core.paths import is_safe_request_id, normalize_session_id
from core.principal import log_agents
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
from core.tree import DISK, Anchor, DiskWriter, UnsafeFolder, leftover_temp_files, remove
from core.watch import watch_session_folders
from core.wire import (
    ForwardedResponse,
    ParsedRequest,
    RequestRejected,
    approve,
    deny,
    encode_response,
    over_limit,
    parse_request,
)

log = logging.getLogger("pi_authorizer.serve")

SAFETY_RESCAN_S = 1.0
#: After a failing loop step, wait this long before the step runs again (no hot error loop).
STEP_FAILURE_PAUSE_S = 1.0
#: At shutdown, how long the files already taken in may take to be served to the end.
SHUTDOWN_GRACE_S = 10.0
#: Files one intake trip reads: small enough that a burst is judged while its first files are being
#: committed (the publisher then takes everything queued, up to `MAX_BATCH`, as one batch).
INTAKE_FILES = 256
#: Request bytes one intake trip may hold (with at most `INTAKE_FILES` files): memory stays bounded.
READ_BUDGET = 32 << 20
_T = TypeVar("_T")
NO_FACTS_EXPLANATION = (
    "This request carries no child-fixed facts (no usable accessIntent, as from every 20.7.3 child), "
    "so this node's rules cannot judge it: it comes to you."
)


class Judge(Protocol):
    """Recorded authority: this node's own rules, on the child's facts, scoped to its agent."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment: ...


class Chain(Protocol):
    """Non-terminal judges after the rules; `None` means every link deferred."""

    async def review(self, parsed: ParsedRequest) -> Judgment | None: ...


class NoRecordedAuthority:
    """A node with no rules: everything with facts asks by default, everything without floors to ask."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        if parsed.access_intent is None:
            return Judgment(verdict="ask", explanation=(NO_FACTS_EXPLANATION,))
        return Judgment(verdict="ask", explanation=("No rules are loaded on this node: default ask.",))


EventKind = Literal[
    "arrived",
    "answered",
    "withdrawn",
    "quarantined",
    "left",
    "answer_failed",
    "forged",
    "not_serving",
    "serving_again",
    "unsafe_folder",
]


@dataclass(frozen=True)
class ServeEvent:
    """What happened to one request file; observers (TUI, history) subscribe to these.

    `unsafe_folder` is about a folder, not a file: `key.name` is the refused folder's path and
    `reason` says why it is not served (a link planted in the session tree, never followed).
    """

    kind: EventKind
    key: AskKey
    at: float
    parsed: ParsedRequest | None = None
    response: ForwardedResponse | None = None
    outcome: str | None = None
    reason: str | None = None
    raw: bytes | None = None


Observer = Callable[[ServeEvent], None]
_Track = Literal["processing", "answering", "answered", "pending", "left", "quarantined"]


@dataclass
class ServedSession:
    inbox: SessionInbox
    lock: SessionLock
    heartbeat: Heartbeat
    tracked: dict[str, _Track] = field(default_factory=dict)
    asks: dict[str, Ask] = field(default_factory=dict)
    scan_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    unservable: str | None = None
    settling: dict[str, Published] = field(default_factory=dict)
    """Answered requests being removed by the publisher, with the answer that removes each."""
    problems: dict[str, ServeEvent] = field(default_factory=dict)
    """Refused folders by part (`inbox`, `heartbeat`): the `unsafe_folder` event that reported each."""


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
        # Heartbeats get their own thread: a busy default executor never delays a beat.
        self._beats = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="heartbeat")
        self.sessions: dict[str, ServedSession] = {}
        self._by_folder: dict[str, ServedSession] = {}
        self._observers: list[Observer] = []
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
        session_id = normalize_session_id(raw_id)
        if session_id in self.sessions:
            return self.sessions[session_id]
        lock = SessionLock(self.state_dir, session_id, self.state_tree)
        lock.acquire()
        foreign = live_foreign_server(self.root, session_id, self.tree)
        if foreign is not None and foreign.pid != lock.previous_pid:
            # A live server that is not the authorizer whose lock we just took over (a pi parent).
            lock.release()
            raise SessionHeld(session_id, f"pid {foreign.pid} (live serving heartbeat)")
        inbox = SessionInbox(self.root, session_id, self.tree, self.writer)
        _remove_leftover_temps(self.tree, ("sessions", inbox.folder_name, "responses"), ("serving",))
        heartbeat = Heartbeat(self.root, session_id, self.tree)
        served = ServedSession(inbox=inbox, lock=lock, heartbeat=heartbeat)
        self._beat(served)
        self.sessions[session_id] = served
        self._by_folder[inbox.folder_name] = served
        log.info("serving session %s (inbox %s)", log_safe(session_id), inbox.requests_dir)
        if self._tasks:
            self._spawn(self.rescan(served))
        return served

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Serve until `stop()`; on exit heartbeats are removed and locks released."""
        try:
            self._spawn(self._heartbeat_loop())
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
        for served in self.sessions.values():
            with contextlib.suppress(OSError):
                served.heartbeat.clear()
            served.lock.release()
        self._beats.shutdown(wait=False)
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

    async def _heartbeat_loop(self) -> None:
        """Beat every second in a thread of its own; a session that cannot be served is not beaten
        for, and its heartbeat is removed, so no child or authorizer takes it for served."""
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            for served in list(self.sessions.values()):
                beat = served.heartbeat.clear if served.unservable else served.heartbeat.beat
                try:
                    await loop.run_in_executor(self._beats, beat)
                except UnsafeFolder as exc:
                    self._beat_refused(served, exc)
                    continue
                except Exception as exc:
                    log.warning("heartbeat for %s failed: %s", log_safe(served.inbox.session_id), exc)
                    continue
                if not served.unservable:
                    self._clear_unsafe(served, "heartbeat")
            await self._pause(HEARTBEAT_INTERVAL_S)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    def _beat(self, served: ServedSession) -> None:
        try:
            served.heartbeat.beat()
        except UnsafeFolder as exc:
            self._beat_refused(served, exc)
            return
        self._clear_unsafe(served, "heartbeat")

    def _beat_refused(self, served: ServedSession, exc: UnsafeFolder) -> None:
        self._report_unsafe(served, "heartbeat", exc, "no serving heartbeat is published")

    def _report_unsafe(self, served: ServedSession, part: str, exc: UnsafeFolder, consequence: str) -> None:
        """A folder of the session tree is a link (or not a folder): said once in the log and to observers."""
        reason = f"{exc}: {consequence} until it is removed"
        known = served.problems.get(part)
        if known is not None and known.reason == reason:
            return
        key = AskKey(served.inbox.session_id, exc.where)
        event = ServeEvent("unsafe_folder", key, self.clock.wall(), reason=reason)
        served.problems[part] = event
        self._emit(event)
        log.warning("session=%s %s", log_safe(served.inbox.session_id), log_safe(reason, 400))

    def _clear_unsafe(self, served: ServedSession, part: str) -> None:
        if served.problems.pop(part, None) is not None:
            log.info("session=%s %s folders are sound again", log_safe(served.inbox.session_id), part)

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
                self._report_unsafe(served, "inbox", exc, "this session's requests are not served")
                self._set_unservable(served, f"a folder of its inbox is refused: {exc}")
                return
            self._clear_unsafe(served, "inbox")

    async def _drain(self, served: ServedSession) -> None:
        """One pass over the inbox; raises `UnsafeFolder` when a folder of the session tree is refused."""
        known = frozenset(served.tracked)
        try:
            # One trip off the loop lists the inbox and reads the first batch of new files, so a burst
            # is judged, recorded and published together (and a single ask pays one trip).
            names, intake = await asyncio.to_thread(_scan, served.inbox, known, self.ledger)
        except UnsafeFolder:
            raise
        except Exception as exc:
            self._set_unservable(served, f"its inbox cannot be listed: {exc}")
            return
        self._set_unservable(served, None)
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
            intake = await asyncio.to_thread(_take_in, served.inbox, new[:INTAKE_FILES], self.ledger)

    async def _serve_batch(self, served: ServedSession, intake: _Intake) -> None:
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

    def _set_unservable(self, served: ServedSession, reason: str | None) -> None:
        """Say (log, event) when a session cannot be served at all, and when it can again."""
        if reason == served.unservable:
            return
        key = AskKey(served.inbox.session_id, "")
        previous, served.unservable = served.unservable, reason
        if reason is not None:
            log.error("NOT SERVING session %s: %s", log_safe(served.inbox.session_id), log_safe(reason, 300))
            self._emit(ServeEvent("not_serving", key, self.clock.wall(), reason=reason))
        elif previous is not None:
            log.info("serving session %s again", log_safe(served.inbox.session_id))
            self._emit(ServeEvent("serving_again", key, self.clock.wall()))

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
                "%s withdrawn by the child before an answer", self._label(key, ask.parsed if ask else None)
            )

    async def _serve_file(self, served: ServedSession, name: str, read: _Read, intake: _Intake) -> None:
        """Serve one file; whatever goes wrong, it is quarantined with the reason and serving goes on."""
        try:
            await self._serve_unguarded(served, name, read, intake)
        except UnsafeFolder as exc:
            # The session tree is refused, not this file: reported, served once it is sound.
            if served.tracked.get(name) == "processing":
                del served.tracked[name]
            self._report_unsafe(served, "inbox", exc, "this session's requests are not served")
        except Exception as exc:
            key = AskKey(served.inbox.session_id, name)
            log.error("%s: serving failed", self._label(key, None), exc_info=True)
            ask = served.asks.pop(name, None)
            if ask is not None and not ask.withdrawn:
                ask.withdrawn = True
                self.terminal.withdraw(key)
            reason = f"serving this file failed ({type(exc).__name__}: {exc})"
            await self._reject(served, name, reason, None)

    async def _serve_unguarded(self, served: ServedSession, name: str, read: _Read, intake: _Intake) -> None:
        key = AskKey(served.inbox.session_id, name)
        if read.gone:
            served.tracked.pop(name, None)
            return
        stem = name.removesuffix(".json")
        if not is_safe_request_id(stem):
            reason = f"file name {display_name(name)!r} is not a request id (^[A-Za-z0-9._-]+$, not . or ..)"
            await self._reject(served, name, reason, read.raw)
            return
        if read.parsed is None:
            await self._reject(served, name, read.rejection or "unusable request", read.raw)
            return
        parsed = read.parsed
        request = parsed.request
        if request.id != stem:
            await self._reject(
                served, name, f"request id {request.id!r} does not match its file name", read.raw
            )
            return
        target = request.target_session_id.strip()
        if target != served.inbox.session_id:
            reason = (
                f"request targets session {target!r} but was found in the inbox of "
                f"{served.inbox.session_id!r}"
            )
            await self._reject(served, name, reason, read.raw)
            return
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
        limit = over_limit(parsed.access_intent)
        if limit is not None:
            # Refused before any rule sees it: bounded work, and the agent is told which limit.
            ask.judgment = Judgment(verdict="deny", explanation=(f"over the per-request limit: {limit}",))
            await ask.answer(self._gate_denial(served, f"the ask is too large: {limit}"), "over-limit")
            return
        judgment = self.judge.judge(parsed, served.inbox.session_id)
        ask.judgment = judgment
        if judgment.verdict != "ask":
            await ask.answer(self._rule_response(served, judgment), "rule")
            return
        if self.chain is not None:
            self._spawn(self._after_chain(served, ask))
        else:
            await self._to_terminal(served, ask)

    async def _after_chain(self, served: ServedSession, ask: Ask) -> None:
        assert self.chain is not None
        try:
            verdict = await self.chain.review(ask.parsed)
        except Exception:
            log.error(
                "%s: the chain failed; it counts as defer", self._label(ask.key, ask.parsed), exc_info=True
            )
            verdict = None
        if ask.withdrawn:
            return
        if verdict is not None:
            ask.judgment = verdict
            await ask.answer(self._rule_response(served, verdict), "chain")
            return
        await self._to_terminal(served, ask)

    async def _to_terminal(self, served: ServedSession, ask: Ask) -> None:
        if served.tracked.get(ask.key.name) == "processing":
            served.tracked[ask.key.name] = "pending"
        await self.terminal.receive(ask)
        if ask.outcome == "left" and served.tracked.get(ask.key.name) == "pending":
            served.tracked[ask.key.name] = "left"
            self._emit(ServeEvent("left", ask.key, self.clock.wall(), parsed=ask.parsed))
            log.info("%s left for another authorizer", self._label(ask.key, ask.parsed))

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
                "%s was answered by this node before a restart; request removed", self._label(key, parsed)
            )
            return
        await self._forged(served, name, parsed, "before this node served the request")

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
            ask = served.asks.get(name)
            if ask is not None and f"{ask.request.id}.json" in responses and not ask.withdrawn:
                ask.withdrawn = True
                served.asks.pop(name, None)
                self.terminal.withdraw(ask.key)
                await self._forged(served, name, ask.parsed, "while the ask waited for this node's verdict")

    async def _forged(self, served: ServedSession, name: str, parsed: ParsedRequest, when: str) -> None:
        """Report a response this node did not write (log, event, history) and set the request aside."""
        key = AskKey(served.inbox.session_id, name)
        body = await asyncio.to_thread(served.inbox.peek_response, parsed.request.id)
        ours = "" if self.ledger is not None else " (this node keeps no history, so it may be its own)"
        reason = (
            f"FORGED RESPONSE: a response this node did not write appeared {when}{ours}; "
            f"the child may act on it: {body!r}"
        )
        log.warning("%s %s", self._label(key, parsed), log_safe(reason, 400))
        await self._quarantine(served, name, reason, False, parsed.raw, kind="forged")

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
            await self._reject(served, name, reason, parsed.raw, answer=False)
            return
        served.tracked[name] = "answered"
        written = await self._retrying(
            "publishing a recorded verdict", lambda: served.inbox.write_response(request_id, recorded.body)
        )
        await asyncio.to_thread(ledger.mark_written, [WrittenMark(key, request_id, written)])
        log.info("%s recorded verdict published after a restart", self._label(key, None))
        await self._remove_request(served, name)

    async def _remove_request(self, served: ServedSession, name: str) -> None:
        """Delete an answered request; once gone, its name is free for a new request."""
        await asyncio.to_thread(served.inbox.delete_request, name)
        if served.tracked.get(name) == "answered":
            del served.tracked[name]

    def _rule_response(self, served: ServedSession, judgment: Judgment) -> ForwardedResponse:
        now = wall_ms(self.clock)
        if judgment.verdict == "allow":
            return approve(responder=served.inbox.session_id, at_ms=now, decided_by=judgment.decided_by)
        return deny(
            responder=served.inbox.session_id,
            at_ms=now,
            decided_by=judgment.decided_by,
            reason=judgment.reason,
        )

    def _gate_denial(self, served: ServedSession, reason: str) -> ForwardedResponse:
        """A denial no person made, with the reason the child passes on to its agent."""
        return gate_denial(served.inbox.session_id, self.clock, reason)

    async def _retrying(self, step: str, action: Callable[[], _T]) -> _T:
        """Run blocking `action` off the event loop; retry transient failures with backoff."""
        delays = (0.0, *self.retry_delays)
        for attempt, delay in enumerate(delays, start=1):
            if delay:
                await asyncio.sleep(delay)
            try:
                return await asyncio.to_thread(action)
            except (OSError, sqlite3.OperationalError) as exc:
                if attempt == len(delays):
                    raise
                log.warning("%s failed (attempt %d of %d): %s; retrying", step, attempt, len(delays), exc)
        raise AssertionError("unreachable")

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
            log.error("%s: writing the response failed: %s", self._label(key, ask.parsed), error)
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
            await self._forged(served, name, ask.parsed, "before this node's verdict could be written")
            return Answered(False, "a response this node did not write was already there")
        now = self.clock.wall()
        self._emit(ServeEvent("answered", key, now, parsed=ask.parsed, response=response, outcome=outcome))
        log.info("%s %s", self._label(key, ask.parsed), _describe(response, outcome, ask, now))
        if published.history_failed is not None:
            return Answered(False, f"{published.history_failed}; the child was denied for safety")
        return Answered(True)

    async def _reject(
        self, served: ServedSession, name: str, reason: str, raw: bytes | None, answer: bool = True
    ) -> None:
        """Quarantine an unusable file; answer its child at once when its name is a safe id."""
        stem = name.removesuffix(".json")
        answered = False
        try:
            if answer and is_safe_request_id(stem) and not served.inbox.has_response(stem):
                body = encode_response(self._gate_denial(served, reason))
                answered = await self._retrying(
                    "answering a rejected request", lambda: served.inbox.write_response(stem, body)
                )
        except Exception as exc:
            log.error("answering rejected %s failed: %s", log_safe(display_name(name)), exc)
        await self._quarantine(served, name, reason, answered, raw)

    async def _quarantine(
        self,
        served: ServedSession,
        name: str,
        reason: str,
        answered: bool,
        raw: bytes | None = None,
        kind: EventKind = "quarantined",
    ) -> None:
        key = AskKey(served.inbox.session_id, name)
        try:
            record = await asyncio.to_thread(self.quarantine.hold, served.inbox, name, reason, answered)
            self._clear_unsafe(served, "quarantine")
        except Exception as exc:
            where = f"could not be quarantined ({exc}); left in place and ignored"
            if isinstance(exc, UnsafeFolder):
                self._report_unsafe(served, "quarantine", exc, "unusable requests are left in place")
            served.tracked[name] = "quarantined"
        else:
            if record.left_in_place is not None:
                where = f"left in place ({record.left_in_place})"
                served.tracked[name] = "quarantined"
            else:
                where = f"quarantined to {record.moved_to}" if record.moved_to else "already gone"
                # Moved out: a new file under the same name later is a new request, served as such.
                served.tracked.pop(name, None)
        self._emit(ServeEvent(kind, key, self.clock.wall(), reason=reason, raw=raw))
        log.warning(
            "session=%s file=%s rejected: %s; %s%s",
            log_safe(served.inbox.session_id),
            log_safe(display_name(name)),
            log_safe(reason, 300),
            where,
            "; child answered with a gate_error denial" if answered else "",
        )

    def _emit(self, event: ServeEvent) -> None:
        for observer in list(self._observers):
            try:
                observer(event)
            except Exception:
                log.exception("observer failed on %s", event.kind)

    @staticmethod
    def _label(key: AskKey, parsed: ParsedRequest | None) -> str:
        parts = [f"session={log_safe(key.session_id)}", f"request={log_safe(display_name(key.name))}"]
        if parsed is not None:
            req = parsed.request
            intent = parsed.access_intent
            surface = intent.surface if intent else (req.surface or "?")
            value = intent.match_values[0] if intent and intent.match_values else (req.value or "")
            parts += [
                log_agents(parsed),
                f"surface={log_safe(surface, 40)}",
                f"value={log_safe(value, 80)!s}",
            ]
        return " ".join(parts)

    def pending_names(self, session_id: str) -> Iterable[str]:
        served = self.sessions.get(session_id)
        return [] if served is None else [n for n, s in served.tracked.items() if s in {"pending", "left"}]


def _remove_leftover_temps(tree: Anchor, *folders: tuple[str, ...]) -> None:
    """Temp files of a writer that was killed (`kill -9`) mid-write: never linked, so never seen
    by a child; removed (by descriptor, never through a link) when a session is taken so they do
    not pile up."""
    for parts in folders:
        try:
            with tree.folder(parts) as fd:
                for name, pid in leftover_temp_files(fd):
                    if not pid_alive(pid):
                        with contextlib.suppress(OSError):
                            remove(fd, name)
                            log.info("removed a leftover temp file %s/%s", "/".join(parts),
                                     log_safe(display_name(name), 300))
        except OSError:
            continue


@dataclass(frozen=True)
class _Read:
    """One request file as read off the event loop: gone, unusable (with why), or parsed."""

    gone: bool = False
    raw: bytes | None = None
    parsed: ParsedRequest | None = None
    rejection: str | None = None


@dataclass(frozen=True)
class _Intake:
    """What one trip off the event loop found: the files read (in order), the names already in
    `responses/`, and the verdicts the ledger holds for the request ids read."""

    reads: list[tuple[str, _Read]]
    responses: frozenset[str]
    recorded: dict[str, RecordedVerdict]


def _scan(
    inbox: SessionInbox, known: frozenset[str], ledger: Ledger | None
) -> tuple[list[str], _Intake | None]:
    """The inbox listing, and the first batch of the files not in `known` (None when there are none)."""
    names = inbox.list_request_names()
    new = [name for name in names if name not in known]
    return names, (_take_in(inbox, new[:INTAKE_FILES], ledger) if new else None)


def _take_in(inbox: SessionInbox, names: Sequence[str], ledger: Ledger | None) -> _Intake:
    """Read and parse up to `READ_BUDGET` bytes of the named files (at least one), through one
    descriptor of `requests/`; then list `responses/` and look up recorded verdicts, once for all.
    Raises `UnsafeFolder` when a folder of the session tree is refused."""
    reads: list[tuple[str, _Read]] = []
    held = 0
    try:
        fd = inbox.tree.open(("sessions", inbox.folder_name, "requests"))
    except FileNotFoundError:
        return _Intake([(name, _Read(gone=True)) for name in names], frozenset(), {})
    try:
        for name in names:
            read = _read_guarded(fd, name)
            reads.append((name, read))
            held += len(read.raw or b"")
            if held >= READ_BUDGET:
                break
    finally:
        os.close(fd)
    responses = frozenset(inbox.list_response_names())
    ids = [read.parsed.request.id for _, read in reads if read.parsed is not None]
    recorded: dict[str, RecordedVerdict] = {}
    if ledger is not None and ids:
        try:
            recorded = ledger.recorded_verdicts(inbox.session_id, ids)
        except Exception as exc:
            # Counts as none recorded: publication never replaces a response, and recording the
            # new verdict fails safe.
            log.error("session=%s: reading the history failed: %s", log_safe(inbox.session_id), exc)
    return _Intake(reads, responses, recorded)


def _read_guarded(dir_fd: int, name: str) -> _Read:
    """One file read and parsed; any failure becomes a rejection, so one file never fails a batch."""
    try:
        raw = read_request_in(dir_fd, name)
    except FileNotFoundError:
        return _Read(gone=True)
    except UnreadableRequest as exc:
        return _Read(rejection=f"request file {exc.reason}")
    except Exception as exc:
        return _Read(rejection=f"reading this file failed ({type(exc).__name__}: {exc})")
    try:
        return _Read(raw=raw, parsed=parse_request(raw))
    except RequestRejected as exc:
        return _Read(raw=raw, rejection=f"unusable request: {exc.reason}")
    except Exception as exc:
        return _Read(raw=raw, rejection=f"reading this file failed ({type(exc).__name__}: {exc})")


def _describe(response: ForwardedResponse, outcome: str, ask: Ask, now: float) -> str:
    source = response.decided_by
    by = source.kind if source is not None else "?"
    reason = f" reason={log_safe(response.denial_reason, 120)}" if response.denial_reason else ""
    waited = (now - ask.arrived_at) * 1000
    return f"-> {response.state} by={by} ({outcome}){reason} in {waited:.1f}ms"
