"""The NATS JetStream inbox and the `nats://` transport on a real nats-server (tests/helpers.py:
NatsServer): verdicts relayed, approvers racing to exactly one verdict, withdrawals, the deadline."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest

from core.courier.broker import ASK_PREFIX, DECISION_BUCKET, ask_subject, decision_key, encode_parcel, token
from core.courier.broker_access import BrokerAccess
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.courier.signing import node_key
from core.courier.transport import Hop, Parcel, Unreachable
from core.history import HistoryStore
from core.serving.judgment import NoRecordedAuthority
from core.testing import AllowAll, ManualClock, ScriptedArbiter
from core.vocabulary.asks import Judgment, LeavingArbiter
from core.vocabulary.events import ServeEvent
from core.wire.request import ParsedRequest
from tests.helpers import NatsServer, broker_parcel, free_port, wait_for, wait_for_async


def approver(server: NatsServer, node: str, arbiter: ScriptedArbiter, **kw: object) -> BrokerInbox:
    return BrokerInbox(server.url, node=node, judge=NoRecordedAuthority(), arbiter=arbiter, **kw)  # type: ignore[arg-type]


async def test_a_parcel_is_judged_by_the_approver_and_its_verdict_relayed(nats_server: NatsServer) -> None:
    person = ScriptedArbiter("person", lambda ask: "deny")
    inbox = approver(nats_server, "node-b", person)
    await inbox.start()
    courier = NatsCourier(nats_server.url, node="courier-a")
    try:
        parcel = broker_parcel("req-1")
        relayed = await courier.carry(parcel)
        assert relayed.response.approved is False
        assert relayed.response.denial_reason == "denied by person"
        assert "node-b" in relayed.decided_by
        (key,) = person.asked
        assert key.session_id == "nats:host-a/sess-1" and key.name == "req-1"
        # the queue shows where it came through: the parcel's hops (provenance), the facts unchanged
        shown = person.shown[key]
        assert [(h.host, h.session_id, h.node) for h in shown.request.hops or ()] == [
            ("host-a", "sess-1", "courier-host-a")]
        assert shown.parsed.raw == parcel.request
        # carried again (a courier restarted after a kill): the same verdict, asked nobody again
        again = await courier.carry(parcel)
        assert again.response == relayed.response
        assert len(person.asked) == 1
    finally:
        await courier.close()
        await inbox.close()


async def test_this_nodes_rules_decide_before_its_arbiter(nats_server: NatsServer) -> None:
    person = ScriptedArbiter("person", lambda ask: "deny")
    inbox = BrokerInbox(nats_server.url, node="node-b", judge=AllowAll(), arbiter=person)
    await inbox.start()
    courier = NatsCourier(nats_server.url, node="courier-a")
    try:
        relayed = await courier.carry(broker_parcel("req-rule"))
        assert relayed.response.approved is True
        assert person.asked == []
        # the courier may read the verdict before its writer has noted it: waited for
        await wait_for(lambda: [s.outcome for s in inbox.stats.settled] == ["rule"], what="noted")
    finally:
        await courier.close()
        await inbox.close()


class AllowingLink:
    """A chain link that allows what the rules left (the person is never asked)."""

    def __init__(self) -> None:
        self.reviewed: list[str] = []

    async def review(self, parsed: ParsedRequest) -> Judgment | None:
        self.reviewed.append(parsed.request.id)
        return AllowAll().judge(parsed, "link")


async def test_an_approvers_chain_decides_after_its_rules_and_before_its_arbiter(
    nats_server: NatsServer,
) -> None:
    """A parcel goes down the one route as a file does: the rules left it, the chain decided it."""
    person = ScriptedArbiter("person", lambda ask: "deny")
    link = AllowingLink()
    inbox = approver(nats_server, "node-b", person, chain=link)
    await inbox.start()
    courier = NatsCourier(nats_server.url, node="courier-a")
    try:
        relayed = await courier.carry(broker_parcel("req-chain"))
        assert relayed.response.approved is True
        assert link.reviewed == ["req-chain"] and person.asked == []
        await wait_for(lambda: [s.outcome for s in inbox.stats.settled] == ["chain"], what="noted")
    finally:
        await courier.close()
        await inbox.close()


async def test_a_parcel_its_arbiter_leaves_is_acknowledged_and_never_answered(
    nats_server: NatsServer,
) -> None:
    """`--on-ask leave` on an approver: the parcel is settled as left (its message acknowledged, so it
    is not handed to this node again) and its key holds no answer of this node."""
    events: list[ServeEvent] = []
    inbox = BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(), arbiter=LeavingArbiter(),
                        observe=events.append)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        courier = NatsCourier(nats_server.url, node="c")  # lays the broker out, then is not used
        await courier._connected()
        await courier.close()
        await js.publish(ask_subject("host-a", "sess-1"), encode_parcel(broker_parcel("left-1")))
        await inbox.start()
        await wait_for(lambda: [s.outcome for s in inbox.stats.settled] == ["left"], what="left")
        assert [event.kind for event in events] == ["arrived", "left"]
        assert inbox.holding == 0

        async def acknowledged() -> bool:
            info = await js.consumer_info("PIAUTH_ASKS", inbox.durable)
            return bool(info.num_ack_pending == 0 and info.delivered.stream_seq == 1)

        await wait_for_async(acknowledged, what="its message acknowledged")
        kv = await js.key_value(DECISION_BUCKET)
        with pytest.raises(nats.js.errors.KeyNotFoundError):
            await kv.get(decision_key("host-a", "left-1"))
    finally:
        await nc.close()
        await inbox.close()


@pytest.mark.timeout(60)
async def test_racing_approvers_leave_exactly_one_verdict_per_parcel(nats_server: NatsServer) -> None:
    """Three approvers (two deny at once, a person approves at once) race on 120 parcels: one verdict
    per parcel, what the courier relays is it, and the two others report it decided elsewhere. With no
trust lists, each signature is its writer's claim: named so, never as a node's decision."""
    arbiters = [ScriptedArbiter("deny-1", lambda a: "deny"), ScriptedArbiter("deny-2", lambda a: "deny"),
                ScriptedArbiter("person", lambda a: "allow")]
    inboxes = [approver(nats_server, f"node-{i}", arb) for i, arb in enumerate(arbiters)]
    for inbox in inboxes:
        await inbox.start()
    courier = NatsCourier(nats_server.url, node="courier-a")
    parcels = [broker_parcel(f"race-{n}") for n in range(120)]
    try:
        relayed = await asyncio.gather(*(courier.carry(p) for p in parcels))
        await wait_for(lambda: all(
            sum(1 for i in inboxes for s in i.stats.settled if s.parcel_id == p.parcel_id) == 3
            for p in parcels), what="every approver settled every parcel")
        nc = await nats.connect(nats_server.url)
        kv = await nc.jetstream().key_value(DECISION_BUCKET)
        for parcel, verdict in zip(parcels, relayed, strict=True):
            settled = [(i.node, s) for i in inboxes for s in i.stats.settled
                       if s.parcel_id == parcel.parcel_id]
            winners = [node for node, s in settled if s.outcome == "user"]
            losers = [s.words for node, s in settled if s.outcome == "elsewhere"]
            assert len(winners) == 1 and len(losers) == 2, settled
            claimed = f"decided elsewhere by an unverified writer (claims to be {winners[0]!r})"
            assert all(words == claimed for words in losers), settled
            entry = await kv.get(decision_key(token("host-a"), parcel.parcel_id))
            stored = json.loads(entry.value or b"")
            assert stored["by"] == winners[0] == verdict.claimed_by and winners[0] in verdict.decided_by
            assert verdict.decider_node is None and "unverified" in verdict.decided_by
            assert verdict.response.approved == (winners[0] == "node-2")
        # every write the bucket ever took: one per parcel (a second writer never got in)
        assert (await nc.jetstream().stream_info(f"KV_{DECISION_BUCKET}")).state.last_seq == len(parcels)
        await nc.close()
    finally:
        await courier.close()
        for inbox in inboxes:
            await inbox.close()


async def test_a_courier_withdrawal_withdraws_the_ask_everywhere(nats_server: NatsServer,
                                                                tmp_path: Path) -> None:
    """Signed by the courier, whose key the approvers trust (`[couriers]`): named as its withdrawal."""
    key = node_key(tmp_path / "courier", "courier-a")
    trusting = BrokerAccess(couriers=((key.public, "courier-a"),))
    people = [ScriptedArbiter(f"person-{i}", lambda a: None) for i in range(2)]
    inboxes = [approver(nats_server, f"node-{i}", p, access=trusting) for i, p in enumerate(people)]
    for inbox in inboxes:
        await inbox.start()
    courier = NatsCourier(nats_server.url, node="courier-a", node_key=key)
    try:
        carrying = asyncio.create_task(courier.carry(broker_parcel("req-w")))
        await wait_for(lambda: all(p.held for p in people), what="both people shown the ask")
        carrying.cancel()
        await courier.withdraw("req-w", "the child withdrew its request")
        await wait_for(lambda: all(inbox.holding == 0 for inbox in inboxes), what="withdrawn everywhere")
        for person in people:
            (reason,) = person.withdrawn.values()
            assert reason == "withdrawn by the courier at courier-a: the child withdrew its request"
            assert person.held == {}
    finally:
        await courier.close()
        for inbox in inboxes:
            await inbox.close()


async def test_the_courier_never_waits_past_the_childs_deadline(nats_server: NatsServer) -> None:
    clock = ManualClock(wall=1_700_000_000.0)
    courier = NatsCourier(nats_server.url, node="courier-a", clock=clock)
    parcel = broker_parcel("req-late")
    parcel = Parcel(parcel.parcel_id, parcel.request, parcel.hops, deadline_ms=clock.wall() * 1000 + 5_000)
    try:
        carrying = asyncio.create_task(courier.carry(parcel))
        await wait_for(lambda: clock.waiting > 0, what="the courier waits for a verdict")
        clock.advance(4.0)
        await wait_for(lambda: clock.waiting > 0 and not carrying.done(), what="still waiting at 4 s")
        clock.advance(1.0)
        with pytest.raises(Unreachable, match="deadline"):
            await carrying
    finally:
        await courier.close()


async def test_an_unreachable_broker_is_reported_after_a_bounded_wait() -> None:
    clock = ManualClock()
    courier = NatsCourier(f"nats://127.0.0.1:{free_port()}", node="courier-a", clock=clock,
                          unreachable_after_s=3.0, request_timeout_s=0.5)
    carrying = asyncio.create_task(courier.carry(broker_parcel("req-x")))
    try:
        while not carrying.done():
            await wait_for(lambda: clock.waiting > 0 or carrying.done(), what="a retry wait")
            clock.advance(0.5)
            await asyncio.sleep(0)
        with pytest.raises(Unreachable, match=r"nats://127\.0\.0\.1:\d+ unreachable"):
            await carrying
        # the bounded wait (3 s), give or take the test's steps of the clock: never the child's 60 s
        assert clock.monotonic() - 1_000.0 <= 6.0
    finally:
        await courier.close()


async def test_hostile_parcels_are_refused_with_a_reason_and_serving_goes_on(nats_server: NatsServer) -> None:
    person = ScriptedArbiter("person", lambda ask: "allow")
    inbox = approver(nats_server, "node-b", person)
    await inbox.start()
    courier = NatsCourier(nats_server.url, node="courier-a")
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        await js.publish(f"{ASK_PREFIX}.host-a.sess-1", b"\xff not json")
        await js.publish(f"{ASK_PREFIX}.host-a.sess-1", b'{"v":1,"parcelId":"p\\u0000"}')
        # a usable envelope whose request is junk: denied with why, so its courier is answered
        junk = Parcel("junk-1", b"{not json", (Hop("host-a", "sess-1", "c"),), 9e12)
        await js.publish(ask_subject("host-a", "sess-1"), encode_parcel(junk))
        # a host passing its ask off as another host's: refused, answered under the publisher's key
        forged = broker_parcel("forged-1", host="host-b")
        await js.publish(ask_subject("host-a", "sess-1"), encode_parcel(forged))
        good = await courier.carry(broker_parcel("good-1"))
        assert good.response.approved is True
        await wait_for(lambda: len(inbox.stats.quarantined) >= 4, what="four parcels refused")
        kv = await js.key_value(DECISION_BUCKET)
        for parcel_id in ("junk-1", "forged-1"):
            entry = await kv.get(decision_key("host-a", parcel_id))
            body = json.loads(json.loads(entry.value or b"")["body"])
            assert body["approved"] is False and "unusable" in body["denialReason"]
        assert any("claims to come from 'host-b'" in reason for reason in inbox.stats.quarantined)
        assert [k.name for k in person.asked] == ["good-1"]
    finally:
        await nc.close()
        await courier.close()
        await inbox.close()


async def test_a_parcel_delivered_again_is_settled_once(nats_server: NatsServer) -> None:
    """A second delivery (past the broker's dedupe window, or an ack lost) is acknowledged without a
    second verdict, a second ask or a second report."""
    person = ScriptedArbiter("person", lambda ask: "allow")
    inbox = approver(nats_server, "node-b", person)
    await inbox.start()
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        parcel = broker_parcel("twice-1")
        for copy in ("a", "b"):  # the second once the first is answered, and while it is shown
            await js.publish(ask_subject("host-a", "sess-1"), encode_parcel(parcel),
                             headers={"Nats-Msg-Id": f"twice-1-{copy}"})
            await wait_for(lambda: len(inbox.stats.settled) == 1, what="the first settled")
        last = broker_parcel("last-1")
        await js.publish(ask_subject("host-a", "sess-1"), encode_parcel(last))
        await wait_for(lambda: any(s.parcel_id == "last-1" for s in inbox.stats.settled), what="all read")
        assert [s.parcel_id for s in inbox.stats.settled] == ["twice-1", "last-1"]
        assert [k.name for k in person.asked] == ["twice-1", "last-1"]
    finally:
        await nc.close()
        await inbox.close()


async def test_two_copies_of_a_parcel_in_one_batch_are_asked_once(nats_server: NatsServer) -> None:
    """A batch's parcels are served side by side: two copies of one (published again past the dedupe
    window) are one ask, one verdict, one report, and both messages are acknowledged."""
    person = ScriptedArbiter("person", lambda ask: "allow")
    inbox = approver(nats_server, "node-b", person, ack_wait_s=60.0)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        courier = NatsCourier(nats_server.url, node="c")  # lays the broker out, then is not used
        await courier._connected()
        await courier.close()
        parcel = broker_parcel("pair-1")
        for copy in ("a", "b"):
            await js.publish(ask_subject("host-a", "sess-1"), encode_parcel(parcel),
                             headers={"Nats-Msg-Id": f"pair-1-{copy}"})
        await inbox.start()
        await wait_for(lambda: len(inbox.stats.settled) == 1, what="the parcel settled")
        async def both_acknowledged() -> bool:  # sent after the verdict: read on the broker
            info = await js.consumer_info("PIAUTH_ASKS", inbox.durable)
            return bool(info.num_ack_pending == 0 and info.delivered.stream_seq == 2)

        await wait_for_async(both_acknowledged, what="both copies acknowledged")
        assert [k.name for k in person.asked] == ["pair-1"]
    finally:
        await nc.close()
        await inbox.close()


async def test_the_approvers_history_records_broker_asks_truthfully(nats_server: NatsServer,
                                                                   tmp_path: Path) -> None:
    """The winner's history holds its verdict on the child's bytes, with the hops; the loser's says
    the ask ended elsewhere (withdrawn there, not answered)."""
    stores = [HistoryStore(tmp_path / f"h{i}.sqlite3") for i in range(2)]
    person = ScriptedArbiter("person", lambda ask: "allow")
    other = ScriptedArbiter("other", lambda ask: None)
    inboxes = [BrokerInbox(nats_server.url, node=f"node-{i}", judge=NoRecordedAuthority(), arbiter=arb,
                           ledger=store, observe=store.observe)
               for i, (arb, store) in enumerate(zip((person, other), stores, strict=True))]
    await inboxes[1].start()
    courier = NatsCourier(nats_server.url, node="courier-a")
    try:
        carrying = asyncio.create_task(courier.carry(broker_parcel("hist-1")))
        await wait_for(lambda: bool(other.held), what="the other node shows it")
        await inboxes[0].start()
        relayed = await carrying
        assert relayed.response.approved
        await wait_for(lambda: inboxes[1].holding == 0, what="the other node withdrew it")
        # recorded just after the key was won, so perhaps after the courier read it: waited for
        await wait_for(lambda: [r.written for r in stores[0].rows(stores[0].ids())] == [1], what="recorded")
        (won,) = stores[0].rows(stores[0].ids())
        assert (won.served_session, won.request_name) == ("nats:host-a/sess-1", "hist-1")
        assert won.verdict == "approved" and won.written == 1 and won.raw is not None
        assert b'"hops"' not in won.raw  # the child's bytes exactly
        (lost,) = stores[1].rows(stores[1].ids())
        assert lost.outcome == "withdrawn" and lost.verdict is None
    finally:
        await courier.close()
        for inbox in inboxes:
            await inbox.close()
        for store in stores:
            store.close()
