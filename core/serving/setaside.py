"""Setting a file aside: an unusable request is quarantined with its reason (its child answered at
once with an explained denial when its name is a safe id), and a response this node did not write is
reported as forged and its request set aside. Nothing is deleted without a trace."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Sequence
from typing import TypeVar

from core.clock import Clock
from core.disk.paths import is_safe_request_id
from core.disk.tree import UnsafeFolder
from core.forwarding.inbox import display_name
from core.serving.asks import AskKey
from core.serving.events import EventKind, ServeEvent
from core.serving.publisher import gate_denial
from core.serving.quarantine import Quarantine
from core.serving.records import AskRecord
from core.serving.sessions import ServedSession, Sessions
from core.text import log_safe
from core.wire.principal import log_agents
from core.wire.request import ParsedRequest
from core.wire.response import encode_response

log = logging.getLogger("pi_authorizer.serve")
_T = TypeVar("_T")


class SetAside:
    """Quarantine and forgery reports for the files of the sessions served."""

    def __init__(
        self,
        quarantine: Quarantine,
        roster: Sessions,
        emit: Callable[[ServeEvent], None],
        clock: Clock,
        retry_delays: Sequence[float],
        keeps_history: bool,
    ) -> None:
        self.quarantine, self.roster, self.emit, self.clock = quarantine, roster, emit, clock
        self.retry_delays, self.keeps_history = tuple(retry_delays), keeps_history

    async def forged(
        self, served: ServedSession, record: AskRecord, parsed: ParsedRequest, when: str
    ) -> None:
        """Report a response this node did not write (log, event, history) and set the request aside."""
        key = record.key
        body = await asyncio.to_thread(served.inbox.peek_response, parsed.request.id)
        ours = "" if self.keeps_history else " (this node keeps no history, so it may be its own)"
        reason = (
            f"FORGED RESPONSE: a response this node did not write appeared {when}{ours}; "
            f"the child may act on it: {body!r}"
        )
        log.warning("%s %s", label(key, parsed), log_safe(reason, 400))
        await self.quarantine_file(served, record, reason, False, parsed.raw, kind="forged")

    async def reject(
        self, served: ServedSession, record: AskRecord, reason: str, raw: bytes | None, answer: bool = True
    ) -> None:
        """Quarantine an unusable file; answer its child at once when its name is a safe id and the
        file is still there (a withdrawn request's child is gone: a response would be left behind)."""
        name = record.key.name
        stem = name.removesuffix(".json")
        answered = False
        inbox = served.inbox
        try:
            answer = answer and is_safe_request_id(stem) and inbox.has_request(name)
            if answer and not inbox.has_response(stem):
                body = encode_response(gate_denial(inbox.session_id, self.clock, reason))
                answered = await retrying(self.clock, self.retry_delays,
                    "answering a rejected request", lambda: inbox.write_response(stem, body)
                )
        except Exception as exc:
            log.error("answering rejected %s failed: %s", log_safe(display_name(name)), exc)
        await self.quarantine_file(served, record, reason, answered, raw)

    async def quarantine_file(
        self,
        served: ServedSession,
        record: AskRecord,
        reason: str,
        answered: bool,
        raw: bytes | None = None,
        kind: EventKind = "quarantined",
    ) -> None:
        """Move the file to the quarantine; one that cannot be moved is `held` (left in place, ignored)."""
        key, name = record.key, record.key.name
        held = True
        try:
            kept = await asyncio.to_thread(self.quarantine.hold, served.inbox, name, reason, answered)
            self.roster.clear_unsafe(served, "quarantine")
        except Exception as exc:
            where = f"could not be quarantined ({exc}); left in place and ignored"
            if isinstance(exc, UnsafeFolder):
                self.roster.report_unsafe(served, "quarantine", exc, "unusable requests are left in place")
        else:
            if kept.left_in_place is not None:
                where = f"left in place ({kept.left_in_place})"
            else:
                where = f"quarantined to {kept.moved_to}" if kept.moved_to else "already gone"
                held = False  # moved out: a new file under the same name later is a new request
        if held and record.live and record.stage != "held":
            served.records.move(record, "held")
        elif not held:
            served.records.release(record)
        self.emit(ServeEvent(kind, key, self.clock.wall(), reason=reason, raw=raw))
        log.warning(
            "session=%s file=%s rejected: %s; %s%s",
            log_safe(served.inbox.session_id),
            log_safe(display_name(name)),
            log_safe(reason, 300),
            where,
            "; child answered with a gate_error denial" if answered else "",
        )



async def retrying(
    clock: Clock, delays_after: Sequence[float], step: str, action: Callable[[], _T]
) -> _T:
    """Run blocking `action` off the event loop; retry transient failures with backoff on `clock`."""
    delays = (0.0, *delays_after)
    for attempt, delay in enumerate(delays, start=1):
        if delay:
            await clock.wait(asyncio.Event(), delay)
        try:
            return await asyncio.to_thread(action)
        except (OSError, sqlite3.OperationalError) as exc:
            if attempt == len(delays):
                raise
            log.warning("%s failed (attempt %d of %d): %s; retrying", step, attempt, len(delays), exc)
    raise AssertionError("unreachable")


def label(key: AskKey, parsed: ParsedRequest | None) -> str:
    """The request's part of a log line: session, file and, once parsed, agents, surface and value."""
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
