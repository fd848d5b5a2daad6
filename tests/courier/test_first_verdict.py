"""The first verdict is the verdict, on an approver (issue 33), on a real nats-server: a parcel its
history holds as decided is never shown again, whatever happened to its key (purged, republished);
a courier's late note lowers its row to "not delivered" only when signed by a `[couriers]` key."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from core.courier.broker import (
    NOT_DELIVERED,
    NOT_RELAYED,
    BrokerDecision,
    ask_subject,
    connect,
    decision_key,
    encode_parcel,
    late_key,
    token,
)
from core.courier.broker_access import BrokerAccess
from core.courier.broker_history import late_body
from core.courier.broker_inbox import DECIDED_HERE, BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.courier.signing import node_key, parcel_digest
from core.courier.transport import Unreachable
from core.history.store import HistoryStore
from core.serving.judgment import NoRecordedAuthority
from core.testing import ScriptedArbiter
from tests.helpers import NatsServer, broker_parcel, wait_for


async def test_a_purged_and_republished_parcel_is_never_shown_again_by_the_approver_that_decided_it(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """Alice approves; the hostile host purges the key (its history gone) and publishes the parcel
    again under another message id. Alice, restarted (her memory of settled keys gone), finds the
    verdict in her history and never puts the ask before her person again."""
    history = HistoryStore.in_state_dir(tmp_path / "alice")
    alice_key = node_key(tmp_path / "alice", "node-alice")
    first = BrokerInbox(nats_server.url, node="node-alice", judge=NoRecordedAuthority(), node_key=alice_key,
                        arbiter=ScriptedArbiter("person", lambda ask: "allow"), ledger=history,
                        observe=history.observe)
    await first.start()
    courier = NatsCourier(nats_server.url, node="courier-a")
    link = await connect(nats_server.url, timeout_s=2.0, name="hostile")
    again_person = ScriptedArbiter("person", lambda ask: "allow")
    again = BrokerInbox(nats_server.url, node="node-alice", judge=NoRecordedAuthority(), node_key=alice_key,
                        arbiter=again_person, ledger=history, observe=history.observe)
    try:
        parcel = broker_parcel("purged-1", ttl_s=60)
        assert (await courier.carry(parcel)).response.approved is True
        # Alice's row is noted delivered once her create won (the courier may read it first)
        await wait_for(lambda: [(r.verdict, r.written) for r in history.query()] == [("approved", 1)],
                       what="alice's verdict noted delivered")
        await first.close()
        await link.decisions.purge(decision_key(token("host-a"), parcel.parcel_id))
        await link.js.publish(ask_subject("host-a", "sess-1"), encode_parcel(parcel),
                              headers={"Nats-Msg-Id": "purged-1-again"})
        await again.start()
        await wait_for(lambda: any(s.parcel_id == "purged-1" for s in again.stats.settled),
                       what="the republished parcel settled")
        (settled,) = [s for s in again.stats.settled if s.parcel_id == "purged-1"]
        assert (settled.outcome, settled.words) == ("elsewhere", DECIDED_HERE)
        assert again_person.asked == []
        assert [(r.verdict, r.written) for r in history.query()] == [("approved", 1)]  # no second row
    finally:
        await link.close()
        await courier.close()
        await again.close()
        await first.close()
        history.close()


async def test_a_late_note_lowers_the_row_only_when_signed_by_a_trusted_courier(
    nats_server: NatsServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With `[couriers]`, an unsigned late note (anyone with the host's credentials can write one) leaves
    the row delivered, said in the log; one signed by a listed courier lowers it, saying verified."""
    caplog.set_level(logging.INFO, "pi_authorizer")
    courier_key = node_key(tmp_path / "courier", "courier-a")
    history = HistoryStore.in_state_dir(tmp_path / "alice")
    trusting = BrokerAccess(couriers=((courier_key.public, "courier-a"),))
    alice = BrokerInbox(nats_server.url, node="node-alice", judge=NoRecordedAuthority(),
                        arbiter=ScriptedArbiter("person", lambda ask: "allow"), ledger=history,
                        observe=history.observe, access=trusting)
    await alice.start()
    courier = NatsCourier(nats_server.url, node="courier-a", node_key=courier_key)
    link = await connect(nats_server.url, timeout_s=2.0, name="hostile")

    def row(name: str) -> tuple[int | None, str | None]:
        (found,) = [r for r in history.query() if r.request_name == name]
        return found.written, found.reason

    try:
        forged, signed = broker_parcel("late-forged", ttl_s=60), broker_parcel("late-signed", ttl_s=60)
        for parcel in (forged, signed):
            assert (await courier.carry(parcel)).response.approved is True
        await wait_for(lambda: [row(p.parcel_id)[0] for p in (forged, signed)] == [1, 1],
                       what="both verdicts delivered")
        key = late_key(decision_key(token("host-a"), forged.parcel_id))
        await link.decisions.create(key, BrokerDecision("withdrawn", "courier-a", NOT_DELIVERED).encode())
        await wait_for(lambda: any("late note on late-forged" in r.getMessage() for r in caplog.records),
                       what="the unsigned note refused")
        assert row("late-forged") == (1, None)
        key = late_key(decision_key(token("host-a"), signed.parcel_id))
        note = BrokerDecision("withdrawn", "courier-a", NOT_DELIVERED).signed(
            courier_key, key, signed.parcel_id, parcel_digest(signed.request), int(time.time() * 1000))
        await link.decisions.create(key, note.encode())
        await wait_for(lambda: row("late-signed")[0] == 0, what="the signed note believed")
        reason = row("late-signed")[1]
        assert reason is not None and NOT_DELIVERED in reason and "courier-a says, verified" in reason
    finally:
        await link.close()
        await courier.close()
        await alice.close()
        history.close()


async def test_a_verdict_the_courier_does_not_believe_is_recorded_not_delivered_by_its_approver(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """Bob's verdict wins, but the courier trusts only alice: its child gets the fallback. Bob's row
    must not say delivered: the courier notes beside the key that it did not relay it, signed."""
    alice, courier_key = node_key(tmp_path / "alice", "node-alice"), node_key(tmp_path / "c", "courier-a")
    history = HistoryStore.in_state_dir(tmp_path / "bob")
    bob = BrokerInbox(nats_server.url, node="node-bob", judge=NoRecordedAuthority(),
                      arbiter=ScriptedArbiter("person", lambda ask: "allow"), ledger=history,
                      observe=history.observe,
                      access=BrokerAccess(couriers=((courier_key.public, "courier-a"),)))
    await bob.start()
    courier = NatsCourier(nats_server.url, node="courier-a", node_key=courier_key, unreachable_after_s=2.0,
                          access=BrokerAccess(approvers=((alice.public, "node-alice"),)))
    try:
        with pytest.raises(Unreachable, match="not believed"):
            await courier.carry(broker_parcel("untrusted-1", ttl_s=60))
        await wait_for(lambda: [r.written for r in history.query()] == [0], what="bob's row lowered")
        (row,) = history.query()
        assert row.reason is not None and NOT_RELAYED in row.reason, row
        assert "courier-a says, verified" in row.reason
    finally:
        await courier.close()
        await bob.close()
        history.close()


async def test_a_late_note_written_while_the_approver_was_down_is_read_at_its_restart(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """The courier's late notes land while alice is down. Restarted, she reads them: the row a signed
    note names is lowered, once its recorded verdict is exactly her verdict on that key; a note on
    another key naming that row (its writer's claim) lowers nothing."""
    courier_key = node_key(tmp_path / "courier", "courier-a")
    history = HistoryStore.in_state_dir(tmp_path / "alice")
    alice_key = node_key(tmp_path / "alice", "node-alice")
    trusting = BrokerAccess(couriers=((courier_key.public, "courier-a"),))

    def alice() -> BrokerInbox:
        return BrokerInbox(nats_server.url, node="node-alice", judge=NoRecordedAuthority(),
                           node_key=alice_key, arbiter=ScriptedArbiter("person", lambda ask: "allow"),
                           ledger=history, observe=history.observe, access=trusting)

    def written() -> dict[str, int | None]:
        return {r.request_name: r.written for r in history.query()}

    first, again = alice(), alice()
    await first.start()
    courier = NatsCourier(nats_server.url, node="courier-a", node_key=courier_key)
    link = await connect(nats_server.url, timeout_s=2.0, name="courier-a")
    try:
        parcels = [broker_parcel(f"down-{n}", ttl_s=60) for n in range(3)]
        for parcel in parcels:
            assert (await courier.carry(parcel)).response.approved is True
        await wait_for(lambda: written() == {"down-0": 1, "down-1": 1, "down-2": 1}, what="all delivered")
        await first.close()
        # a note on down-1's key naming down-0's row, then a true one on down-2's
        for on, names in ((parcels[1], parcels[0]), (parcels[2], parcels[2])):
            key = decision_key(token("host-a"), on.parcel_id)
            body = late_body(f"{NOT_DELIVERED} (gave up)", "host-a", "sess-1",
                             json.loads(names.request)["id"])
            note = BrokerDecision("withdrawn", "courier-a", body).signed(
                courier_key, late_key(key), on.parcel_id, parcel_digest(on.request), int(time.time() * 1000))
            await link.decisions.create(late_key(key), note.encode())
        await again.start()
        await wait_for(lambda: written()["down-2"] == 0, what="the true note read at the restart")
        assert written() == {"down-0": 1, "down-1": 1, "down-2": 0}
    finally:
        await link.close()
        await courier.close()
        await again.close()
        await first.close()
        history.close()
