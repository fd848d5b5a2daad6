"""The `nats://HOST:PORT` transport: a parcel published on the broker, its verdict awaited in the
decisions bucket (`core/courier/broker.py` holds the layout).

Publishing is idempotent (the parcel id is the JetStream message id, and the decision key is derived
from it), so a courier restarted after a kill carries the same parcel again and reads the same
verdict. Every wait is bounded: the child's deadline, and `unreachable_after_s` without the broker,
counted from its first failure after it last answered (a courier itself stopped a while never counts
its own pause as the broker's; waits on the injected clock; nats-py's own requests bounded by
`request_timeout_s`).

A courier that gives up withdraws the parcel in the same step: the withdrawal is a `create` on the
parcel's decision key, so the withdrawal or a verdict wins, never both; a verdict that won is relayed
instead of the fallback. A withdrawal the broker cannot take now is written once it can, and a
verdict found then was written after the child read its fallback: the courier notes it beside the
key (`late_key`), so the approver records it as not delivered. Until then the ask stays kept
(`owed`): a courier killed or stopped first withdraws it at its next start.

The key's decision is its **first** value (`read_own_first_decision`: its history, through a consumer
scoped to this host's keys), so a delete, a purge's marker or a later write never reopens it or puts
another verdict in its place; it is relayed only if a trusted approver signed it (`_relayed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from nacl.signing import SigningKey
from nats.aio.msg import Msg

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.courier.broker import (
    BROKER_DOWN,
    DECISION_SUBJECT_PREFIX,
    NOT_DELIVERED,
    NOT_RELAYED,
    BrokerDecision,
    BrokerLink,
    ask_subject,
    broker_url,
    connect,
    create_decision,
    decision_key,
    encode_parcel,
    late_key,
    token,
)
from core.courier.broker_access import BrokerAccess
from core.courier.broker_health import BrokerHealth
from core.courier.broker_history import late_body, read_own_first_decision
from core.courier.signing import NodeKey, parcel_digest
from core.courier.transport import Carried, Parcel, Relayed, Unreachable, decider_words
from core.wire.base import strict_json_loads
from core.wire.response import parse_response

log = logging.getLogger("pi_authorizer.courier")

#: How long the broker may be out of reach before the courier gives up (its fallback then answers).
DEFAULT_UNREACHABLE_AFTER_S = 10.0
#: How often a waiting courier reads the key anyway (a write missed while reconnecting).
RECHECK_S = 1.0


class NatsCourier:
    """A `Courier` to a NATS JetStream broker. One connection, opened on first use, shared by every
    parcel; `host` names the courier's host in subjects and keys (its hop's host)."""

    def __init__(
        self,
        target: str,
        *,
        node: str,
        clock: Clock = SYSTEM_CLOCK,
        unreachable_after_s: float = DEFAULT_UNREACHABLE_AFTER_S,
        request_timeout_s: float = 2.0,
        retry_s: float = 0.2,
        access: BrokerAccess | None = None,
        node_key: NodeKey | None = None,
    ) -> None:
        self.target = broker_url(target)
        self.node = node
        #: This node's key (`<state>/node.nk`, or its access file's `node_key`): its withdrawals are
        #: signed with it, under its name. None: a key for this run only (a test's node).
        self.node_key = node_key if node_key is not None else NodeKey(node, SigningKey.generate())
        #: Credentials and TLS (`--broker-access`).
        self.access = access
        self.clock = clock
        self.unreachable_after_s = unreachable_after_s
        self.request_timeout_s = request_timeout_s
        self.retry_s = retry_s
        self._link: BrokerLink | None = None
        self._connecting = asyncio.Lock()
        #: Parcel id → the key it was carried under (so `withdraw` knows the host token) and the digest
        #: of its request bytes (what a verdict or a withdrawal is signed for).
        self._keys: dict[str, tuple[str, str]] = {}
        #: Parcel id → where the approver's row for it is (`late_body`): for a late note.
        self._rows: dict[str, tuple[str, str, str]] = {}
        #: Parcel id → its withdrawal the broker could not take yet, written in the background until it can.
        self._owed: dict[str, asyncio.Task[None]] = {}
        #: The broker's state as this courier saw it last: one log line per change, not per retry.
        self.health = BrokerHealth(self.target)

    async def _connected(self) -> BrokerLink:
        async with self._connecting:
            if self._link is None or self._link.nc.is_closed:
                self._link = await connect(self.target, timeout_s=self.request_timeout_s, name=self.node,
                                           access=self.access)
                log.info("%s: node %s signs with %s (its line in an approver's [couriers]: %s = \"%s\")",
                         self.target, self.node, self.node_key.public, self.node_key.name,
                         self.node_key.public)
            return self._link

    def _out_of_reach(self, since: float, why: BaseException | str) -> Unreachable:
        waited = self.clock.monotonic() - since
        return Unreachable(f"{self.target} unreachable: {why} (for {waited:.1f} s)")

    async def carry(self, parcel: Parcel) -> Relayed:
        """Publish the parcel and wait for its verdict, never past the child's deadline; a withdrawal
        that won the key (this or another courier withdrew it) ends the wait as `Unreachable`."""
        if not parcel.hops:
            raise ValueError("a parcel carries at least this node's hop")
        origin = parcel.hops[-1]
        key = decision_key(token(origin.host), parcel.parcel_id)
        digest = parcel_digest(parcel.request)
        self._keys[parcel.parcel_id] = (key, digest)
        self._rows[parcel.parcel_id] = (origin.host, origin.session_id, _request_id(parcel.request))
        subject = ask_subject(origin.host, origin.session_id)
        body = encode_parcel(parcel)
        deadline = self.clock.monotonic() + max(0.0, (parcel.deadline_ms - wall_ms(self.clock)) / 1000)
        landed = asyncio.Event()
        published = False
        #: When the broker first failed since it last answered: a courier that was itself stopped
        #: (SIGSTOP, asleep) counts only from its first failure after it runs again, never its own pause.
        failing_since: float | None = None
        sub = None

        async def on_write(msg: Msg) -> None:
            landed.set()

        try:
            while True:
                now = self.clock.monotonic()
                if now >= deadline:
                    raise Unreachable(f"{self.target}: no verdict before the child's deadline")
                try:
                    link = await self._connected()
                    if sub is None:
                        sub = await link.nc.subscribe(f"{DECISION_SUBJECT_PREFIX}.{key}", cb=on_write)
                    if not published:
                        await link.js.publish(
                            subject, body, timeout=self.request_timeout_s,
                            headers={"Nats-Msg-Id": parcel.parcel_id},
                        )
                        published = True
                    landed.clear()
                    # the key's first value is its decision: a delete or later value never reopens it
                    decision = await read_own_first_decision(link, key, self.request_timeout_s)
                    failing_since = None
                    self.health.saw_connected()
                except BROKER_DOWN as exc:
                    self.health.saw_failure(exc, self.access.user if self.access is not None else None)
                    failed_at = self.clock.monotonic()
                    failing_since = failed_at if failing_since is None else failing_since
                    if failed_at - failing_since >= self.unreachable_after_s:
                        raise self._out_of_reach(failing_since, exc) from exc
                    await self.clock.wait(asyncio.Event(), min(self.retry_s, deadline - now))
                    continue
                if decision is not None:
                    # Decided: a withdrawal could no longer win the key, so none is written later.
                    self._keys.pop(parcel.parcel_id, None)
                    try:
                        return self._relayed(decision, key, parcel.parcel_id, digest)
                    except Unreachable as exc:
                        if decision.kind == "verdict":  # its approver's row must not say delivered
                            await self._note_late(key, parcel.parcel_id, digest, f"{NOT_RELAYED} ({exc})")
                        raise
                    finally:
                        self._rows.pop(parcel.parcel_id, None)
                await self.clock.wait(landed, min(RECHECK_S, max(0.0, deadline - self.clock.monotonic())))
        finally:
            if sub is not None:
                with contextlib.suppress(*BROKER_DOWN):
                    await sub.unsubscribe()

    def _relayed(self, decision: BrokerDecision, key: str, parcel_id: str, digest: str) -> Relayed:
        """The verdict a key holds, relayed only as far as this courier can verify it: signed by an
        `[approvers]` key, it is that approver's; with a trust list, anything else is no answer (the
        fallback answers, saying why); with none, it is relayed as its writer's claim, naming nobody."""
        if decision.kind == "withdrawn":
            raise Unreachable(f"{self.target}: the ask was {decision.words}")
        trusted = self.access.trusted("approvers") if self.access is not None else {}
        why = decision.why_not(trusted, key, parcel_id, digest)
        if why is not None and trusted:
            log.warning("%s: a verdict on %s naming %r is not relayed: %s", self.target, parcel_id,
                        decision.by, why)
            raise Unreachable(f"{self.target}: a verdict claiming to be {decision.by[:64]!r}'s is not "
                              f"believed ({why})")
        response = parse_response(decision.body.encode("utf-8"))
        if response is None:
            raise Unreachable(f"{self.target}: the verdict written by {decision.by} is unreadable")
        if why is not None:
            log.info("%s: the verdict on %s is relayed as claimed by %r, unverified: %s", self.target,
                     parcel_id, decision.by, why)
            return Relayed(response=response, decided_by=decider_words(
                response, f"claimed by {decision.by}, unverified"), claimed_by=decision.by)
        return Relayed(response=response, decided_by=decider_words(
            response, f"approver {decision.by}, verified"), decider_node=decision.by)

    async def withdraw(self, parcel_id: str, reason: str) -> Relayed | None:
        """Write the withdrawal in the parcel's decision key (create-only), within one bounded try: the
        verdict that won instead is returned (relayed by a courier whose child is unanswered). A
        withdrawal the broker cannot take now is owed: written in the background once it can."""
        carried = self._keys.pop(parcel_id, None)
        if carried is None:
            self._rows.pop(parcel_id, None)
            return None
        key, digest = carried
        try:
            won = await asyncio.wait_for(self._withdraw(key, parcel_id, digest, reason),
                                         self.request_timeout_s)
        except Exception as exc:  # not taken, whatever the transport raised: owed, never forgotten
            self._owe_later(key, parcel_id, digest, reason, exc)
            return None
        if won is None or won.kind == "withdrawn":
            self._rows.pop(parcel_id, None)
            return None
        log.info("%s: %s was already %s", self.target, parcel_id, won.words)
        try:
            return self._relayed(won, key, parcel_id, digest)
        except Unreachable as exc:  # its approver's row must not say delivered
            await self._note_late(key, parcel_id, digest, f"{NOT_RELAYED} ({exc})")
            return None
        finally:
            self._rows.pop(parcel_id, None)

    async def abandon(self, carried: Carried, reason: str) -> None:
        """Withdrawn as `withdraw` does, for a parcel an earlier run carried (its child read nothing
        from this node): a verdict that won the key, trusted or not, is noted beside it as not
        delivered, so its approver's row says so."""
        key = decision_key(token(carried.host), carried.parcel_id)
        parcel_id, digest = carried.parcel_id, carried.digest
        self._rows[parcel_id] = (carried.host, carried.session_id, carried.request_id)
        try:
            won = await asyncio.wait_for(self._withdraw(key, parcel_id, digest, reason),
                                         self.request_timeout_s)
        except Exception as exc:  # not taken, whatever the transport raised: owed, never forgotten
            self._owe_later(key, parcel_id, digest, reason, exc)
            return
        if won is None or won.kind == "withdrawn":
            log.info("%s: %s withdrawn (%s)", self.target, parcel_id, reason)
            self._rows.pop(parcel_id, None)
            return
        log.warning("%s: %s was %s while this courier was down, and its child gave up: not delivered",
                    self.target, parcel_id, won.words)
        try:  # nobody waits on this note (its child is gone): one that fails now is owed, as a withdrawal is
            await asyncio.wait_for(self._late(key, parcel_id, digest, f"{NOT_DELIVERED} ({reason})"),
                                   self.request_timeout_s)
        except Exception as exc:
            self._owe_later(key, parcel_id, digest, reason, exc)
            return
        self._rows.pop(parcel_id, None)

    def _owe_later(self, key: str, parcel_id: str, digest: str, reason: str, exc: BaseException) -> None:
        log.warning("%s: could not withdraw %s yet (%s): written once the broker answers",
                    self.target, parcel_id, exc)
        task = asyncio.ensure_future(self._owe(key, parcel_id, digest, reason))
        self._owed[parcel_id] = task
        task.add_done_callback(lambda done: self._paid(parcel_id, done))

    def _paid(self, parcel_id: str, task: asyncio.Task[None]) -> None:
        if self._owed.get(parcel_id) is task:
            del self._owed[parcel_id]

    async def owed(self, parcel_id: str) -> None:
        """Returns once the withdrawal owed for the parcel (or its late note) is written; at once when
        none is. Raises `CancelledError` when it is stopped unwritten (`close`): the ask stays kept."""
        task = self._owed.get(parcel_id)
        if task is not None:
            await asyncio.shield(task)

    async def _withdraw(self, key: str, parcel_id: str, digest: str, reason: str) -> BrokerDecision | None:
        """The withdrawal, signed by this courier, create-only; the decision that won instead, if any: the
        key's first value (a create that lands after a hostile delete is no win)."""
        link = await self._connected()
        mine = BrokerDecision("withdrawn", self.node_key.name, reason).signed(
            self.node_key, key, parcel_id, digest, wall_ms(self.clock))
        won = await create_decision(link.decisions, key, mine)
        first = await read_own_first_decision(link, key, self.request_timeout_s)
        won = first if first is not None else won
        return None if won is None or won == mine else won

    async def _owe(self, key: str, parcel_id: str, digest: str, reason: str) -> None:
        """The owed withdrawal, retried until the broker takes it. The child has read its fallback by
        then: a verdict that won the key meanwhile was never delivered, and is noted so beside it."""
        said = False
        while True:
            await self.clock.wait(asyncio.Event(), self.retry_s)
            try:
                won = await asyncio.wait_for(self._withdraw(key, parcel_id, digest, reason),
                                             self.request_timeout_s)
                if won is None or won.kind == "withdrawn":
                    log.info("%s: %s withdrawn", self.target, parcel_id)
                    self._rows.pop(parcel_id, None)
                    return
                await self._late(key, parcel_id, digest, f"{NOT_DELIVERED} ({reason})")
            except BROKER_DOWN:
                continue
            except Exception:  # not a broker that is down: said once, and tried again all the same
                if not said:
                    said = True
                    log.warning("%s: withdrawing %s failed; tried again", self.target, parcel_id,
                                exc_info=True)
                continue
            log.warning("%s: %s was %s after this courier had answered its child: not delivered",
                        self.target, parcel_id, won.words)
            return

    async def _late(self, key: str, parcel_id: str, digest: str, body: str) -> None:
        """The note beside `key` that the verdict which won it did not reach the child (signed by this
        courier, create-only): the approver's row then says not delivered."""
        link = await self._connected()
        row = self._rows.get(parcel_id)
        if row is not None and row[2]:
            body = late_body(body, *row)
        note = BrokerDecision("withdrawn", self.node_key.name, body).signed(
            self.node_key, late_key(key), parcel_id, digest, wall_ms(self.clock))
        await create_decision(link.decisions, late_key(key), note)
        self._rows.pop(parcel_id, None)

    async def _note_late(self, key: str, parcel_id: str, digest: str, body: str) -> None:
        """`_late` within one bounded try (the child's fallback does not wait for it)."""
        try:
            await asyncio.wait_for(self._late(key, parcel_id, digest, body), self.request_timeout_s)
        except BROKER_DOWN as exc:
            log.warning("%s: could not note beside %s that its verdict was not relayed (%s)", self.target,
                        parcel_id, exc)

    async def close(self) -> None:
        """Owed withdrawals stop here; their asks stay kept (`core/courier/carried.py`), so the next
        start's `resume` writes them."""
        owed = list(self._owed.values())
        for task in owed:
            task.cancel()
        await asyncio.gather(*owed, return_exceptions=True)
        link, self._link = self._link, None
        if link is not None:
            with contextlib.suppress(*BROKER_DOWN):
                await link.close()


def _request_id(request: bytes) -> str:
    """The child's request id, as the approver reads it (its row is named by it); empty if unreadable."""
    try:
        value = strict_json_loads(request)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ""
    found = value.get("id") if isinstance(value, dict) else None
    return found if isinstance(found, str) and 0 < len(found) <= 200 else ""
