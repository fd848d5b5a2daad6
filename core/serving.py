"""The serving core: drain each served inbox, judge, escalate what is left, answer exactly once.

Per request: read (hostile-safe) → validate → recorded authority → chain → terminal slot. Unlike the
reference, one undecided ask never blocks the inbox: rule-decided asks keep flowing while a person
(or a slow chain link) thinks, and every session is rescanned as soon as inotify says it changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from core.asks import DEFAULT_FORWARDING_TIMEOUT_MS, Answered, Ask, AskKey, Judgment, TerminalSlot
from core.inbox import Quarantine, SessionInbox, UnreadableRequest, display_name
from core.liveness import HEARTBEAT_INTERVAL_S, Heartbeat, SessionHeld, SessionLock, live_foreign_server
from core.logline import log_safe
from core.paths import is_safe_request_id, normalize_session_id
from core.watch import watch_session_folders
from core.wire import (
    ForwardedResponse,
    GateErrorDecision,
    ParsedRequest,
    RequestRejected,
    approve,
    deny,
    encode_response,
    parse_request,
)

log = logging.getLogger("pi_authorizer.serve")

SAFETY_RESCAN_S = 1.0
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


@dataclass(frozen=True)
class RecordedVerdict:
    """A verdict the ledger holds for a request: its exact response bytes, and whether it is visible."""

    body: bytes
    written: bool


class Ledger(Protocol):
    """Durable history: a verdict is recorded before its response file becomes visible."""

    def record_verdict(
        self, key: AskKey, parsed: ParsedRequest, response: ForwardedResponse, body: bytes, outcome: str
    ) -> None: ...

    def mark_written(self, key: AskKey, request_id: str, written: bool) -> None: ...

    def recorded_verdict(self, session_id: str, request_id: str) -> RecordedVerdict | None: ...


class NoRecordedAuthority:
    """A node with no rules: everything with facts asks by default, everything without floors to ask."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        if parsed.access_intent is None:
            return Judgment(verdict="ask", explanation=(NO_FACTS_EXPLANATION,))
        return Judgment(verdict="ask", explanation=("No rules are loaded on this node: default ask.",))


EventKind = Literal["arrived", "answered", "withdrawn", "quarantined", "left", "answer_failed"]


@dataclass(frozen=True)
class ServeEvent:
    """What happened to one request file; observers (TUI, history) subscribe to these."""

    kind: EventKind
    key: AskKey
    at: float
    parsed: ParsedRequest | None = None
    response: ForwardedResponse | None = None
    outcome: str | None = None
    reason: str | None = None
    raw: bytes | None = None


Observer = Callable[[ServeEvent], None]
_Track = Literal["processing", "answered", "pending", "left", "quarantined"]


@dataclass
class ServedSession:
    inbox: SessionInbox
    lock: SessionLock
    heartbeat: Heartbeat
    tracked: dict[str, _Track] = field(default_factory=dict)
    asks: dict[str, Ask] = field(default_factory=dict)
    scan_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


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
    ) -> None:
        self.root = forwarding_root
        self.state_dir = state_dir
        self.terminal = terminal
        self.judge: Judge = judge or NoRecordedAuthority()
        self.chain = chain
        self.timeout_ms = timeout_ms
        self.force_polling = force_polling
        self.ledger = ledger
        self.quarantine = Quarantine(state_dir)
        self.sessions: dict[str, ServedSession] = {}
        self._by_folder: dict[str, ServedSession] = {}
        self._observers: list[Observer] = []
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._background: list[Callable[[asyncio.Event], Coroutine[object, object, None]]] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> None:
        self._observers.append(observer)

    def add_background(self, task: Callable[[asyncio.Event], Coroutine[object, object, None]]) -> None:
        """A coroutine to run alongside serving, given the stop event (config watching...)."""
        self._background.append(task)

    def add_session(self, raw_id: str) -> ServedSession:
        """Take a session: lock it, publish the heartbeat. Raises `SessionHeld` if served elsewhere."""
        session_id = normalize_session_id(raw_id)
        if session_id in self.sessions:
            return self.sessions[session_id]
        foreign = live_foreign_server(self.root, session_id)
        if foreign is not None:
            raise SessionHeld(session_id, f"pid {foreign.pid} (live serving heartbeat)")
        lock = SessionLock(self.state_dir, session_id)
        lock.acquire()
        inbox = SessionInbox(self.root, session_id)
        served = ServedSession(inbox=inbox, lock=lock, heartbeat=Heartbeat(self.root, session_id))
        served.heartbeat.beat()
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
        for served in self.sessions.values():
            served.heartbeat.clear()
            served.lock.release()

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("serving task failed", exc_info=task.exception())

    async def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            for served in list(self.sessions.values()):
                try:
                    served.heartbeat.beat()
                except OSError as exc:
                    log.warning("heartbeat for %s failed: %s", log_safe(served.inbox.session_id), exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=HEARTBEAT_INTERVAL_S)

    async def _watch_loop(self) -> None:
        async for folders in watch_session_folders(self.root, self._stop, self.force_polling):
            targets = (
                list(self.sessions.values())
                if not folders
                else [s for f in folders if (s := self._by_folder.get(f))]
            )
            for served in targets:
                await self.rescan(served)

    async def _safety_rescan_loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=SAFETY_RESCAN_S)
            await self.rescan_all()

    # -- draining -------------------------------------------------------------------------------

    async def rescan_all(self) -> None:
        for served in list(self.sessions.values()):
            await self.rescan(served)

    async def rescan(self, served: ServedSession) -> None:
        """Diff the inbox listing against what we track: new files are served, vanished ones withdrawn."""
        async with served.scan_lock:
            names = served.inbox.list_request_names()
            present = set(names)
            for name in list(served.tracked):
                if name not in present:
                    self._forget(served, name)
            for name in names:
                if name not in served.tracked:
                    served.tracked[name] = "processing"
                    await self._serve_file(served, name)

    def _forget(self, served: ServedSession, name: str) -> None:
        state = served.tracked.pop(name)
        ask = served.asks.pop(name, None)
        if state in {"pending", "left", "processing"}:
            key = AskKey(served.inbox.session_id, name)
            if ask is not None:
                ask.withdrawn = True
            self.terminal.withdraw(key)
            self._emit(ServeEvent("withdrawn", key, time.time(), parsed=ask.parsed if ask else None))
            log.info(
                "%s withdrawn by the child before an answer", self._label(key, ask.parsed if ask else None)
            )

    async def _serve_file(self, served: ServedSession, name: str) -> None:
        key = AskKey(served.inbox.session_id, name)
        try:
            raw = served.inbox.read_request(name)
        except FileNotFoundError:
            served.tracked.pop(name, None)
            return
        except UnreadableRequest as exc:
            self._reject(served, name, f"request file {exc.reason}", None)
            return
        try:
            parsed = parse_request(raw)
        except RequestRejected as exc:
            self._reject(served, name, f"unusable request: {exc.reason}", raw)
            return
        stem = name.removesuffix(".json")
        request = parsed.request
        if request.id != stem:
            self._reject(served, name, f"request id {request.id!r} does not match its file name", raw)
            return
        target = request.target_session_id.strip()
        if target != served.inbox.session_id:
            self._reject(
                served,
                name,
                f"request targets session {target!r} but was found in the inbox of "
                f"{served.inbox.session_id!r}",
                raw,
            )
            return
        if served.inbox.has_response(request.id):
            # Answered before (an earlier run died between answer and delete): never answer twice.
            served.tracked[name] = "answered"
            if self.ledger is not None:
                recorded = self.ledger.recorded_verdict(key.session_id, request.id)
                if recorded is not None and not recorded.written:
                    # That run died between the link and noting it: the response is its verdict.
                    self.ledger.mark_written(key, request.id, True)
            served.inbox.delete_request(name)
            return
        if self._reconcile(served, name, request.id):
            return
        self._emit(ServeEvent("arrived", key, time.time(), parsed=parsed, raw=raw))
        ask = Ask(
            key=key,
            parsed=parsed,
            judgment=Judgment(verdict="ask"),
            arrived_at=time.time(),
            timeout_ms=self.timeout_ms(),
            answer_with=lambda response, outcome: self._answer(served, name, response, outcome),
            responder_session_id=served.inbox.session_id,
        )
        served.asks[name] = ask
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
        verdict = await self.chain.review(ask.parsed)
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
            self._emit(ServeEvent("left", ask.key, time.time(), parsed=ask.parsed))
            log.info("%s left for another authorizer", self._label(ask.key, ask.parsed))

    def _reconcile(self, served: ServedSession, name: str, request_id: str) -> bool:
        """A verdict an earlier run recorded: publish it (once) instead of judging again."""
        if self.ledger is None:
            return False
        recorded = self.ledger.recorded_verdict(served.inbox.session_id, request_id)
        if recorded is None:
            return False
        key = AskKey(served.inbox.session_id, name)
        served.tracked[name] = "answered"
        if not recorded.written:
            written = served.inbox.write_response(request_id, recorded.body)
            self.ledger.mark_written(key, request_id, written)
            log.info("%s recorded verdict published after a restart", self._label(key, None))
        served.inbox.delete_request(name)
        return True

    def _rule_response(self, served: ServedSession, judgment: Judgment) -> ForwardedResponse:
        now = time.time_ns() // 1_000_000
        if judgment.verdict == "allow":
            return approve(responder=served.inbox.session_id, at_ms=now, decided_by=judgment.decided_by)
        return deny(
            responder=served.inbox.session_id,
            at_ms=now,
            decided_by=judgment.decided_by,
            reason=judgment.reason,
        )

    async def _answer(
        self, served: ServedSession, name: str, response: ForwardedResponse, outcome: str
    ) -> Answered:
        """Write once, then delete the request (the reference's order)."""
        key = AskKey(served.inbox.session_id, name)
        ask = served.asks.get(name)
        state = served.tracked.get(name)
        if state is None or ask is None or ask.withdrawn:
            return Answered(False, "the child withdrew this request")
        if state == "answered":
            return Answered(False, "this request was already answered")
        body = encode_response(response)
        if self.ledger is not None:
            try:
                self.ledger.record_verdict(key, ask.parsed, response, body, outcome)
            except Exception as exc:
                # Durable before visible: without a history record the verdict is not published.
                log.error("%s: recording the verdict failed: %s", self._label(key, ask.parsed), exc)
                return Answered(False, f"recording the verdict in the history failed: {exc}", gone=False)
        try:
            written = served.inbox.write_response(ask.request.id, body)
            if self.ledger is not None:
                self.ledger.mark_written(key, ask.request.id, written)
        except OSError as exc:
            log.error("%s: writing the response failed: %s", self._label(key, ask.parsed), exc)
            self._emit(ServeEvent("answer_failed", key, time.time(), parsed=ask.parsed, reason=str(exc)))
            return Answered(False, f"writing the response failed: {exc}", gone=False)
        served.tracked[name] = "answered"
        served.asks.pop(name, None)
        ask.outcome = outcome
        if not written:
            log.warning("%s: a response already existed; not answered twice", self._label(key, ask.parsed))
            served.inbox.delete_request(name)
            return Answered(False, "a response file already existed")
        served.inbox.delete_request(name)
        self._emit(
            ServeEvent("answered", key, time.time(), parsed=ask.parsed, response=response, outcome=outcome)
        )
        log.info("%s %s", self._label(key, ask.parsed), _describe(response, outcome, ask))
        return Answered(True)

    def _reject(self, served: ServedSession, name: str, reason: str, raw: bytes | None) -> None:
        """Quarantine an unusable file; answer its child at once when its name is a safe id."""
        key = AskKey(served.inbox.session_id, name)
        stem = name.removesuffix(".json")
        answered = False
        if is_safe_request_id(stem) and not served.inbox.has_response(stem):
            response = deny(
                responder=served.inbox.session_id,
                at_ms=time.time_ns() // 1_000_000,
                decided_by=GateErrorDecision(reason=reason),
                reason=f"pi-authorizer could not serve this request: {reason}",
            )
            try:
                answered = served.inbox.write_response(stem, encode_response(response))
            except OSError as exc:
                log.error("answering rejected %s failed: %s", log_safe(display_name(name)), exc)
        try:
            record = self.quarantine.hold(served.inbox, name, reason, answered)
            where = f"quarantined to {record.moved_to}" if record.moved_to else "already gone"
        except OSError as exc:
            where = f"could not be quarantined ({exc}); left in place and ignored"
        served.tracked[name] = "quarantined"
        self._emit(ServeEvent("quarantined", key, time.time(), reason=reason, raw=raw))
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
                f"agent={log_safe(req.requester_agent_name, 40)}",
                f"surface={log_safe(surface, 40)}",
                f"value={log_safe(value, 80)!s}",
            ]
        return " ".join(parts)

    def pending_names(self, session_id: str) -> Iterable[str]:
        served = self.sessions.get(session_id)
        return [] if served is None else [n for n, s in served.tracked.items() if s in {"pending", "left"}]


def _describe(response: ForwardedResponse, outcome: str, ask: Ask) -> str:
    source = response.decided_by
    by = source.kind if source is not None else "?"
    reason = f" reason={log_safe(response.denial_reason, 120)}" if response.denial_reason else ""
    waited = (time.time() - ask.arrived_at) * 1000
    return f"-> {response.state} by={by} ({outcome}){reason} in {waited:.1f}ms"
