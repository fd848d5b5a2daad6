"""A decision key's history on the broker, read within a node's permissions (`docs/remote.md`,
Signatures): the first value a courier's key holds, through a consumer scoped to its own keys; and,
at an approver's start, the late notes couriers wrote beside keys while it was down, each naming
the approver's row (its writer's claim, checked against the approver's own signed verdict).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets

import nats.js.errors
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from core.courier.broker import (
    BROKER_DOWN,
    DECISION_BUCKET,
    DECISION_SUBJECT_PREFIX,
    MAX_NAME,
    BrokerDecision,
    BrokerLink,
    BrokerRefused,
    decode_decision,
    token,
)
from core.wire.base import strict_json_loads

log = logging.getLogger("pi_authorizer.broker")

#: Where a late note says the approver's row is (after its words): the courier's claim, believed only
#: once the row's recorded verdict is exactly the approver's own signed verdict on the key.
LATE_ROW = "\nrow: "
#: The most late notes an approver reads at start (they are rare: a flood is cut, and said).
MAX_LATE_NOTES = 10_000


def late_body(words: str, host: str, session: str, request_id: str) -> str:
    """A late note's body: its words, then the approver's row (the ask's host, session and request id,
    which the approver's history names it by)."""
    return words + LATE_ROW + json.dumps({"host": host, "session": session, "requestId": request_id},
                                         separators=(",", ":"))


def late_row_of(body: str, key: str) -> tuple[str, str] | None:
    """The row (session `nats:<host>/<session>`, request id) a late note on `key` names, if it names one
    on the key's own host; None otherwise."""
    _, found, named = body.partition(LATE_ROW)
    if not found:
        return None
    try:
        row = strict_json_loads(named.encode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(row, dict):
        return None
    host, session, request_id = row.get("host"), row.get("session"), row.get("requestId")
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_NAME for v in (host, session, request_id)):
        return None
    assert isinstance(host, str) and isinstance(request_id, str)
    if token(host) != key.split(".", 1)[0]:
        return None
    return f"nats:{host}/{session}", request_id


async def read_late_notes(link: BrokerLink, timeout_s: float) -> list[tuple[str, BrokerDecision]]:
    """Every late note the bucket holds (key → note, the key without `.late`), read at an approver's start:
    the ones written while it was down. Through a consumer on `*.*.late` (an approver's permissions)."""
    subject = f"{DECISION_SUBJECT_PREFIX}.*.*.late"
    inbox = link.nc.new_inbox()
    seen: asyncio.Queue[Msg] = asyncio.Queue()

    async def got(msg: Msg) -> None:
        seen.put_nowait(msg)

    sub = await link.nc.subscribe(inbox, cb=got)
    notes: list[tuple[str, BrokerDecision]] = []
    try:
        info = await link.js.add_consumer(f"KV_{DECISION_BUCKET}", ConsumerConfig(
            name=f"late-{secrets.token_hex(8)}", filter_subject=subject, deliver_subject=inbox,
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, ack_policy=AckPolicy.NONE, mem_storage=True,
            num_replicas=1, inactive_threshold=max(5.0, timeout_s * 2)), timeout=timeout_s)
        count = (info.num_pending or 0) + ((info.delivered.consumer_seq or 0) if info.delivered else 0)
        if count > MAX_LATE_NOTES:
            log.warning("the bucket holds %d late notes: only the first %d are read", count, MAX_LATE_NOTES)
        async with asyncio.timeout(timeout_s * 10):
            for _ in range(min(count, MAX_LATE_NOTES)):
                msg = await seen.get()
                if (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE"):
                    continue
                key = msg.subject.removeprefix(DECISION_SUBJECT_PREFIX + ".").removesuffix(".late")
                with contextlib.suppress(BrokerRefused):
                    notes.append((key, decode_decision(msg.data or b"")))
        return notes
    finally:
        with contextlib.suppress(*BROKER_DOWN):
            await sub.unsubscribe()


def _first_of(values: list[Msg]) -> BrokerDecision | None:
    """The first value among a key's messages (oldest first) that is not a delete or purge marker."""
    for msg in values:
        if (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE"):
            continue
        try:
            return decode_decision(msg.data or b"")
        except BrokerRefused as exc:
            return BrokerDecision("withdrawn", "an unknown writer", f"an unreadable decision ({exc.reason})")
    return None


async def read_own_first_decision(link: BrokerLink, key: str, timeout_s: float) -> BrokerDecision | None:
    """The key's first value, as a courier may read it: the latest is read first (a direct get on the
    key's own subject); only if the key holds anything (a value or a delete marker) is its history
    read, through a consumer filtered on the key's subject, created on a subject that names the
    filter (`$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>`, which the server checks against the
    filter asked for) and delivering to this node's own inbox prefix: a host's permissions can scope
    it to its own keys (`core/courier/broker_permissions.py`). A delete, a purge's marker or a later
    value never hides the first value the history still holds."""
    try:
        await link.decisions.get(key)
    except nats.js.errors.KeyNotFoundError as exc:
        if exc.op is None:
            return None  # never written
        # a delete or purge marker: something may have been decided before it, the history says
    subject = f"{DECISION_SUBJECT_PREFIX}.{key}"
    inbox = link.nc.new_inbox()
    seen: asyncio.Queue[Msg] = asyncio.Queue()

    async def got(msg: Msg) -> None:
        seen.put_nowait(msg)

    sub = await link.nc.subscribe(inbox, cb=got)
    try:
        info = await link.js.add_consumer(f"KV_{DECISION_BUCKET}", ConsumerConfig(
            name=f"first-{secrets.token_hex(8)}", filter_subject=subject, deliver_subject=inbox,
            deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, mem_storage=True,
            num_replicas=1, inactive_threshold=max(5.0, timeout_s * 2)), timeout=timeout_s)
        count = (info.num_pending or 0) + ((info.delivered.consumer_seq or 0) if info.delivered else 0)
        values: list[Msg] = []
        async with asyncio.timeout(timeout_s):
            while len(values) < count:
                msg = await seen.get()
                values.append(msg)
                if (msg.headers or {}).get("KV-Operation") not in ("DEL", "PURGE"):
                    break  # the first value: what follows never changes it
        return _first_of(values)
    finally:
        with contextlib.suppress(*BROKER_DOWN):
            await sub.unsubscribe()
