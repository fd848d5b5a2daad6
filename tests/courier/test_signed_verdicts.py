"""Signed verdicts on a real nats-server: a verdict is relayed or named as an approver's only when its
signature verifies under a key the reader trusts, and a decision key's first value stands whatever
is deleted or written after it (`core/courier/signing.py`, `docs/remote.md` § Signatures)."""

from __future__ import annotations

import time
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from core.courier.broker import (
    DECISION_BUCKET,
    BrokerDecision,
    connect,
    decision_key,
    read_first_decision,
    token,
)
from core.courier.broker_access import BrokerAccess
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.courier.signing import node_key, parcel_digest
from core.courier.transport import Unreachable
from core.serving.judgment import NoRecordedAuthority
from core.testing import ScriptedArbiter
from core.wire.response import approve, deny, encode_response
from tests.helpers import NatsServer, broker_parcel, wait_for

SESSION = "sess-1"


def _approval() -> str:
    at = int(time.time() * 1000)
    return encode_response(approve(responder=SESSION, at_ms=at, decided_by=None)).decode()


async def test_a_child_writing_its_own_asks_verdict_with_the_couriers_credentials_is_not_relayed(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """Finding 2: the child reads its courier's access file and writes its own ask's decision key
    naming node-alice, unsigned or signed with a key of its own. With `[approvers]` set, neither is
    an answer: the courier's fallback answers, saying why."""
    alice = node_key(tmp_path / "alice", "node-alice")
    trusting = BrokerAccess(approvers=((alice.public, "node-alice"),))
    own = node_key(tmp_path / "child", "node-alice")  # a key the child made, named as alice
    child = await connect(nats_server.url, timeout_s=2.0, name="child")  # the courier's credentials
    courier = NatsCourier(nats_server.url, node="courier-a", access=trusting, unreachable_after_s=2.0)
    try:
        for n, signed in enumerate((False, True)):
            parcel = broker_parcel(f"forged-{n}", ttl_s=30)
            key = decision_key(token("host-a"), parcel.parcel_id)
            forged = BrokerDecision("verdict", "node-alice", _approval())
            if signed:
                forged = forged.signed(own, key, parcel.parcel_id, parcel_digest(parcel.request),
                                       int(time.time() * 1000))
            await child.decisions.create(key, forged.encode())
            with pytest.raises(Unreachable, match="not believed"):
                await courier.carry(parcel)
    finally:
        await child.close()
        await courier.close()


async def test_a_trusted_signature_is_relayed_as_the_approvers_verified_verdict(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    alice_key = node_key(tmp_path / "alice", "node-alice")
    alice = BrokerInbox(nats_server.url, node="node-alice", judge=NoRecordedAuthority(),
                        arbiter=ScriptedArbiter("person", lambda ask: "allow"), node_key=alice_key)
    await alice.start()
    trusting = BrokerAccess(approvers=((alice_key.public, "node-alice"),))
    courier = NatsCourier(nats_server.url, node="courier-a", access=trusting)
    untrusting = NatsCourier(nats_server.url, node="courier-a")
    try:
        relayed = await courier.carry(broker_parcel("signed-1"))
        assert relayed.response.approved is True
        assert relayed.decider_node == "node-alice" and "node-alice, verified" in relayed.decided_by
        # without a trust list the same verdict is relayed as alice's claim, naming nobody
        claimed = await untrusting.carry(broker_parcel("signed-2"))
        assert claimed.response.approved is True and claimed.decider_node is None
        assert claimed.claimed_by == "node-alice" and "unverified" in claimed.decided_by
    finally:
        await courier.close()
        await untrusting.close()
        await alice.close()


async def test_a_deleted_and_republished_key_never_reopens_the_decision(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """Finding 3: after alice's deny the hostile host deletes its key and writes an approval; a new
    approver reads the key's first value (alice's signed deny), names alice, and never shows it."""
    alice_key, bob_key = node_key(tmp_path / "alice", "node-alice"), node_key(tmp_path / "bob", "node-bob")
    alice = BrokerInbox(nats_server.url, node="node-alice", judge=NoRecordedAuthority(),
                        arbiter=ScriptedArbiter("person", lambda ask: "deny"), node_key=alice_key)
    await alice.start()
    courier = NatsCourier(nats_server.url, node="courier-a")
    bob_person = ScriptedArbiter("bob", lambda ask: "allow")
    bob = BrokerInbox(nats_server.url, node="node-bob", judge=NoRecordedAuthority(), arbiter=bob_person,
                      node_key=bob_key, access=BrokerAccess(approvers=((alice_key.public, "node-alice"),)))
    nc = await nats.connect(nats_server.url)
    try:
        parcel = broker_parcel("reopen-1")
        denied = await courier.carry(parcel)
        assert denied.response.approved is False
        key = decision_key(token("host-a"), parcel.parcel_id)
        js = nc.jetstream()
        kv = await js.key_value(DECISION_BUCKET)
        await kv.delete(key)
        await kv.create(key, BrokerDecision("verdict", "node-bob", _approval()).encode())
        first = await read_first_decision(js, key)
        assert first is not None and first.by == "node-alice" and first.signer == alice_key.public
        await bob.start()
        await wait_for(lambda: any(s.parcel_id == "reopen-1" for s in bob.stats.settled),
                       what="bob settled it")
        (settled,) = [s for s in bob.stats.settled if s.parcel_id == "reopen-1"]
        assert (settled.outcome, settled.words) == ("elsewhere", "decided elsewhere by node-alice")
        assert bob_person.asked == []
        (alice_saw,) = [s for s in alice.stats.settled if s.parcel_id == "reopen-1"]
        assert alice_saw.outcome == "user"
    finally:
        await nc.close()
        await courier.close()
        await bob.close()
        await alice.close()


async def _decided_then_rewritten(nc: Client, key: str, first: BrokerDecision,
                                  *, purge: bool = False) -> None:
    """The hostile host's moves on its own key: `first` written, then deleted (or purged) and an
    unsigned approval naming node-alice written after it."""
    kv = await nc.jetstream().key_value(DECISION_BUCKET)
    await kv.create(key, first.encode())
    await (kv.purge(key) if purge else kv.delete(key))
    await kv.create(key, BrokerDecision("verdict", "node-alice", _approval()).encode())


def _deny() -> str:
    return encode_response(deny(responder=SESSION, at_ms=int(time.time() * 1000), reason="no",
                                decided_by=None)).decode()


async def test_a_courier_relays_the_keys_first_value_never_a_later_one(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """The first verdict is the verdict on the courier too: alice's signed deny, then a delete and an
    approval written after it. A courier reading the key after that relays alice's deny (verified
    with a trust list, her claim without), never the approval that came later."""
    alice = node_key(tmp_path / "alice", "node-alice")
    link = await connect(nats_server.url, timeout_s=2.0, name="hostile")
    trusting = NatsCourier(nats_server.url, node="courier-a",
                           access=BrokerAccess(approvers=((alice.public, "node-alice"),)))
    untrusting = NatsCourier(nats_server.url, node="courier-a")
    try:
        for n, courier in enumerate((trusting, untrusting)):
            parcel = broker_parcel(f"rewritten-{n}", ttl_s=30)
            key = decision_key(token("host-a"), parcel.parcel_id)
            denial = BrokerDecision("verdict", "node-alice", _deny()).signed(
                alice, key, parcel.parcel_id, parcel_digest(parcel.request), int(time.time() * 1000))
            await _decided_then_rewritten(link.nc, key, denial)
            relayed = await courier.carry(parcel)
            assert relayed.response.approved is False, n
            assert relayed.decider_node == ("node-alice" if courier is trusting else None)
    finally:
        await link.close()
        await trusting.close()
        await untrusting.close()


async def test_a_key_deleted_after_its_verdict_is_still_decided_for_a_courier(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """A delete never reopens an ask: a courier arriving after alice's verdict was deleted relays it
    (read from the key's history), rather than waiting for an answer that never comes."""
    alice = node_key(tmp_path / "alice", "node-alice")
    link = await connect(nats_server.url, timeout_s=2.0, name="hostile")
    courier = NatsCourier(nats_server.url, node="courier-a",
                          access=BrokerAccess(approvers=((alice.public, "node-alice"),)))
    try:
        parcel = broker_parcel("deleted-1", ttl_s=30)
        key = decision_key(token("host-a"), parcel.parcel_id)
        verdict = BrokerDecision("verdict", "node-alice", _approval()).signed(
            alice, key, parcel.parcel_id, parcel_digest(parcel.request), int(time.time() * 1000))
        await link.decisions.create(key, verdict.encode())
        await link.decisions.delete(key)
        relayed = await courier.carry(parcel)
        assert relayed.response.approved is True and relayed.decider_node == "node-alice"
    finally:
        await link.close()
        await courier.close()


async def test_after_a_purge_a_courier_believes_only_what_is_left_and_only_if_trusted(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """A purge erases the key's history: a courier that had seen nothing reads what is left, and the
    unsigned approval written after the purge is no answer (its fallback denies, saying why)."""
    alice = node_key(tmp_path / "alice", "node-alice")
    link = await connect(nats_server.url, timeout_s=2.0, name="hostile")
    courier = NatsCourier(nats_server.url, node="courier-a", unreachable_after_s=2.0,
                          access=BrokerAccess(approvers=((alice.public, "node-alice"),)))
    try:
        parcel = broker_parcel("purged-1", ttl_s=30)
        key = decision_key(token("host-a"), parcel.parcel_id)
        denial = BrokerDecision("verdict", "node-alice", _deny()).signed(
            alice, key, parcel.parcel_id, parcel_digest(parcel.request), int(time.time() * 1000))
        await _decided_then_rewritten(link.nc, key, denial, purge=True)
        with pytest.raises(Unreachable, match="not believed"):
            await courier.carry(parcel)
    finally:
        await link.close()
        await courier.close()
