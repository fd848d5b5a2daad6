"""The broker as a door an approver's asks come through and its verdicts go out of: read a parcel's
one answer, deliver a verdict (the one place an approver writes one), acknowledge or terminate a
message. What is judged stays with the route; what is recorded and reported, with the parcel's door
(`core/courier/parcel_door.py`).

Delivering is a KV `create` on the parcel's decision key, retried while the broker is away: the first
of a verdict or a withdrawal wins. A retry that meets this node's own bytes is this node's verdict
(the first try landed and only its reply was lost), never someone else's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from nats.aio.msg import Msg

from core.clock import Clock, wall_ms
from core.courier.broker import BROKER_DOWN, BrokerDecision, BrokerLink, create_decision, read_first_decision
from core.courier.signing import NodeKey

log = logging.getLogger("pi_authorizer.broker")


@dataclass(frozen=True)
class BrokerDoor:
    """One approver's door on one connection to the broker."""

    link: BrokerLink
    node: str
    clock: Clock
    #: Set when the approver stops: a delivery still retrying gives up (raises).
    closing: asyncio.Event
    retry_s: float
    url: str
    #: This node's key: each verdict is signed with it (`core/courier/signing.py`); None: unsigned.
    node_key: NodeKey | None = None

    async def read(self, key: str) -> BrokerDecision | None:
        """The answer a key holds (a verdict, a withdrawal, a courier's late note), None if none yet: its
        first value, never reopened by a delete or a later write (`read_first_decision`)."""
        return await read_first_decision(self.link.js, key)

    async def deliver(self, key: str, body: bytes, name: str, parcel_id: str,
                      digest: str) -> BrokerDecision | None:
        """Write this node's verdict (`body`, the response's exact bytes) create-only, signed over the
        key, the parcel id and `digest` (sha256 of the parcel's bytes, or of the message's raw bytes
        when it could not be decoded), retrying while the broker is away; None when it is the key's
        answer, else the answer that won."""
        mine = BrokerDecision("verdict", self.node, body.decode("utf-8"))
        if self.node_key is not None:
            mine = mine.signed(self.node_key, key, parcel_id, digest, wall_ms(self.clock))
        while True:
            try:
                won = await create_decision(self.link.decisions, key, mine)
                break
            except BROKER_DOWN as exc:
                if self.closing.is_set():
                    raise
                log.info("broker %s: verdict on %s not written yet: %s", self.url, name, exc)
                await self.clock.wait(self.closing, self.retry_s)
        # The key's first value is its answer: a create that landed after a hostile delete is no win.
        try:
            first = await self.read(key)
        except BROKER_DOWN as exc:
            log.info("broker %s: the first value of %s not read back: %s", self.url, name, exc)
            first = None
        won = first if first is not None else won
        if won is None or won == mine:
            return None  # this node's own create landed (perhaps only its reply was lost)
        return won


async def acknowledge(msg: Msg) -> None:
    """The parcel is settled here: the broker does not hand it to this node again."""
    with contextlib.suppress(*BROKER_DOWN):
        await msg.ack()


async def terminate(msg: Msg) -> None:
    """The parcel is refused here (recorded with why): never handed to this node again."""
    with contextlib.suppress(*BROKER_DOWN):
        await msg.term()
