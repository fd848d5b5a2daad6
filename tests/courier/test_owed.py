"""A withdrawal the broker did not take is owed, whatever the transport raised: written on a later try,
so the kept ask is never dropped while its approver's verdict may still win (on a real nats-server)."""

from __future__ import annotations

import asyncio

import pytest

from core.courier.broker import BrokerDecision
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.courier.transport import Unreachable
from core.serving.judgment import NoRecordedAuthority
from core.testing import ScriptedArbiter
from tests.helpers import NatsServer, broker_parcel, wait_for


class _Stumbling(NatsCourier):
    """A courier whose transport raises, once, what no broker error names (a client's own error in
    the middle of a reconnect), then works."""

    stumbles = 1

    async def _withdraw(self, key: str, parcel_id: str, digest: str, reason: str) -> BrokerDecision | None:
        if self.stumbles:
            self.stumbles -= 1
            raise RuntimeError("the client stumbled")
        return await super()._withdraw(key, parcel_id, digest, reason)


async def test_a_withdrawal_the_transport_fails_oddly_is_owed_and_written_later(
    nats_server: NatsServer,
) -> None:
    person = ScriptedArbiter("person", lambda ask: None)  # holds the ask: no verdict wins meanwhile
    inbox = BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(), arbiter=person)
    await inbox.start()
    courier = _Stumbling(nats_server.url, node="courier-a", retry_s=0.05)
    parcel = broker_parcel("req-odd")
    carrying = asyncio.ensure_future(courier.carry(parcel))
    try:
        await wait_for(lambda: len(person.held) == 1, what="the ask before the person up there")
        # Not taken: owed (before, the error went up and the withdrawal was forgotten: a restart
        # then had nothing to withdraw, and the approver's verdict could win unnoted).
        assert await courier.withdraw(parcel.parcel_id, "the child gave up") is None
        await asyncio.wait_for(courier.owed(parcel.parcel_id), 30)  # written on a later try
        with pytest.raises(Unreachable):
            await asyncio.wait_for(carrying, 30)  # the withdrawal won the key: nothing is relayed
    finally:
        carrying.cancel()
        await courier.close()
        await inbox.close()
