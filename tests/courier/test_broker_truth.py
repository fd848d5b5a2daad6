"""Every answer a child may read has one truth on every node (issue 32, findings 1 and 2), on a real
nats-server paused with SIGSTOP:

- a courier that gives up on a paused broker answers its child with the fallback and withdraws the
  parcel; once the broker answers again, the approver's verdict that still won is recorded there as
  not delivered, never as the answer the child read;
- an approver whose `create` landed while its reply was lost (the broker paused under it) finds its
  own verdict on the retry: its row is its verdict, delivered, not "withdrawn"."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nats
import pytest

from core.clock import SYSTEM_CLOCK
from core.courier.arbiter import CourierArbiter, parcel_id_of
from core.courier.broker import (
    DECISION_BUCKET,
    NOT_DELIVERED,
    BrokerDecision,
    BrokerLink,
    ask_subject,
    decision_key,
    encode_parcel,
    token,
)
from core.courier.broker_access import BrokerAccess
from core.courier.broker_door import BrokerDoor
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.courier.signing import node_key
from core.courier.targets import Target
from core.courier.transport import Hop, Parcel
from core.history import HistoryStore
from core.serving.judgment import NoRecordedAuthority
from core.testing import AllowAll, ScriptedArbiter
from core.vocabulary.asks import Ask, AskKey, Decision, DenyingArbiter, Judgment
from core.wire.reader import parse_request
from core.wiring import NodeOptions, build_node
from tests.helpers import (
    NatsServer,
    broker_parcel,
    read_response_when_done,
    request_body,
    serving_session,
    wait_for,
    write_request,
)

SESSION = "sess-1"
COURIER_SESSION = "019ff96a-cccc-7000-8000-000000000033"


@contextmanager
def paused(server: NatsServer) -> Iterator[None]:
    """The broker stopped (SIGSTOP) for the block: connections stay open, nothing is answered."""
    assert server.process is not None
    server.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.process.send_signal(signal.SIGCONT)


def an_ask(n: int) -> Ask:
    body = request_body(f"paused-{n}", SESSION)
    parsed = parse_request(json.dumps(body).encode())
    return Ask(AskKey(SESSION, f"paused-{n}.json"), parsed, Judgment("ask"), time.time(), 600_000, SESSION)


async def decision_of(server: NatsServer, parcel_id: str, host: str = "host-a") -> dict[str, object] | None:
    nc = await nats.connect(server.url)
    try:
        kv = await nc.jetstream().key_value(DECISION_BUCKET)
        try:
            entry = await kv.get(decision_key(token(host), parcel_id))
        except nats.js.errors.KeyNotFoundError:
            return None
        value: dict[str, object] = json.loads(entry.value or b"")
        return value
    finally:
        await nc.close()


@pytest.mark.timeout(90)
async def test_a_courier_that_gives_up_on_a_paused_broker_leaves_no_delivered_verdict_elsewhere(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    history = HistoryStore.in_state_dir(tmp_path / "approver")
    approver = BrokerInbox(nats_server.url, node="node-b", judge=AllowAll(), arbiter=ScriptedArbiter(
        "person", lambda ask: None), ack_wait_s=2.0, request_timeout_s=0.5, retry_s=0.1,
        ledger=history, observe=history.observe)
    await approver.start()
    courier = NatsCourier(nats_server.url, node="courier-a", unreachable_after_s=1.0, request_timeout_s=0.5,
                          retry_s=0.1)
    carrier = CourierArbiter(courier, "deny", SYSTEM_CLOCK, host="host-a", node="courier-a")
    asks = [an_ask(n) for n in range(12)]
    try:
        await courier._connected()  # connected before the pause, as a courier that served a while
        with paused(nats_server):
            pending = [carrier.decide(ask) for ask in asks]
            read = await asyncio.gather(*pending)  # what each child reads: the fallback, in time
        assert all(isinstance(d, Decision) and d.outcome == "fail-safe" for d in read)
        assert all(isinstance(d, Decision) and not d.response.approved for d in read)

        # Once the broker answers again, every parcel's one answer lands: a withdrawal or a verdict.
        ids = [carrier.ids.mint(parcel_id_of(ask)).parcel_id for ask in asks]  # the ids it carried
        answers = [await decision_of(nats_server, parcel_id) for parcel_id in ids]
        deadline = time.monotonic() + 60
        while any(a is None for a in answers) and time.monotonic() < deadline:
            answers = [await decision_of(nats_server, parcel_id) for parcel_id in ids]
        assert all(a is not None for a in answers), answers
        verdicts = sum(a is not None and a["kind"] == "verdict" for a in answers)

        def settled() -> bool:
            """Every owed withdrawal written, every verdict's row of the approver closed, and none says
            an approval reached a child that read a denial (a late note lowers it: not delivered)."""
            rows = [r for r in history.query() if r.verdict is not None or r.response is not None]
            return not courier._owed and len(rows) >= verdicts and all(
                r.ended_at is not None and not (r.verdict == "approved" and r.written == 1) for r in rows)

        await wait_for(settled, within=60, what="the withdrawals written and the approver's rows closed")
        for row in history.query():
            # The child read a denial: no row of the approver may say an approval reached it.
            assert not (row.verdict == "approved" and row.written == 1), row
            if row.verdict == "approved":
                assert row.written == 0 and row.reason is not None and NOT_DELIVERED in row.reason, row
    finally:
        await carrier.close()
        await approver.close()
        history.close()


@pytest.mark.timeout(60)
async def test_a_create_whose_reply_was_lost_is_this_nodes_verdict(
    nats_server: NatsServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "pi_authorizer")
    history = HistoryStore.in_state_dir(tmp_path / "approver")
    person = ScriptedArbiter("person", lambda ask: None)
    approver = BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(), arbiter=person,
                           request_timeout_s=0.5, retry_s=0.1, ledger=history, observe=history.observe)
    await approver.start()
    courier = NatsCourier(nats_server.url, node="courier-a", unreachable_after_s=60.0)
    parcel = broker_parcel("lost-reply")
    carried = asyncio.create_task(courier.carry(parcel))
    try:
        await wait_for(lambda: len(person.held) == 1, what="the ask before the person")
        with paused(nats_server):
            person.release(next(iter(person.held)), "allow")  # its create reaches the paused broker
            retried = lambda: "verdict on lost-reply not written yet" in caplog.text  # noqa: E731
            await wait_for(retried, what="the create's reply lost, and retried")
        relayed = await carried
        assert relayed.response.approved is True
        stored = await decision_of(nats_server, "lost-reply")
        assert stored is not None and stored["by"] == "node-b"
        await wait_for(lambda: [r.written for r in history.query()] == [1], what="the row noted delivered")
        [row] = history.query()
        assert (row.verdict, row.outcome, row.written) == ("approved", "user", 1), row
        assert row.reason is None or "already answered" not in row.reason
        assert [s.outcome for s in approver.stats.settled] == ["user"]
    finally:
        await courier.close()
        await approver.close()
        history.close()


class Cut:
    """A TCP relay between one client and the broker whose wire can be cut (bytes held, not lost) while
    the broker itself keeps answering everyone else: a courier cut off alone."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.open = asyncio.Event()
        self.open.set()
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._pair, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"nats://127.0.0.1:{port}"

    async def _pair(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self.tasks.add(task)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while data := await source.read(65536):
            await self.open.wait()
            sink.write(data)
            await sink.drain()
        sink.close()

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.server is not None:
            self.server.close()


@pytest.mark.timeout(60)
async def test_a_verdict_that_won_after_the_courier_answered_its_child_is_recorded_not_delivered(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    history = HistoryStore.in_state_dir(tmp_path / "approver")
    person = ScriptedArbiter("person", lambda ask: None)
    approver = BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(), arbiter=person,
                           ledger=history, observe=history.observe)
    await approver.start()
    cut = Cut(nats_server.port)
    courier = NatsCourier(await cut.start(), node="courier-a", unreachable_after_s=1.0, request_timeout_s=0.5,
                          retry_s=0.1)
    carrier = CourierArbiter(courier, "deny", SYSTEM_CLOCK, host="host-a", node="courier-a")
    ask = an_ask(1)
    try:
        pending = carrier.decide(ask)
        await wait_for(lambda: len(person.held) == 1, what="the ask before the person up there")
        cut.open.clear()  # the courier alone loses the broker
        read = await pending
        assert isinstance(read, Decision) and read.outcome == "fail-safe"  # what its child reads
        person.release(next(iter(person.held)), "allow")  # the approver still reaches the broker
        await wait_for(lambda: [r.written for r in history.query()] == [1], what="the approval written")
        cut.open.set()
        noted = lambda: [r.written for r in history.query()] == [0]  # noqa: E731
        await wait_for(noted, what="the approver's row told the verdict was not delivered")
        [row] = history.query()
        assert row.verdict == "approved" and row.reason is not None and NOT_DELIVERED in row.reason, row
        assert "courier-a says, unverified" in row.reason  # no [couriers] list: the courier's claim
    finally:
        await carrier.close()
        await cut.close()
        await approver.close()
        history.close()


class _EarlyDoor:
    """The approver's door to the broker, whose first read that finds a late note comes as if before
    JetStream stored it (core NATS can show a publish first): that read finds nothing."""

    def __init__(self, door: BrokerDoor, early: list[int]) -> None:
        self.door, self.early = door, early

    async def read(self, key: str) -> BrokerDecision | None:
        found = await self.door.read(key)
        if found is not None and key.endswith(".late") and self.early[0]:
            self.early[0] -= 1
            return None
        return found

    def __getattr__(self, name: str) -> object:
        return getattr(self.door, name)


class _EarlyInbox(BrokerInbox):
    early: list[int]  # reads left to come early

    def _door_of(self, link: BrokerLink) -> BrokerDoor:
        return _EarlyDoor(super()._door_of(link), self.early)  # type: ignore[return-value]


@pytest.mark.timeout(60)
async def test_a_late_note_read_before_it_was_stored_is_read_again(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """Two red clean-clone runs: the publish of a courier's late note was heard, the read that
    followed came before JetStream had stored it, and nothing read it again: the approver's row kept
    saying "delivered" while the child had read the courier's denial. A heard note is read again."""
    history = HistoryStore.in_state_dir(tmp_path / "approver")
    person = ScriptedArbiter("person", lambda ask: None)
    approver = _EarlyInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(), arbiter=person,
                           ledger=history, observe=history.observe)
    approver.early = [1]
    await approver.start()
    cut = Cut(nats_server.port)
    courier = NatsCourier(await cut.start(), node="courier-a", unreachable_after_s=1.0, request_timeout_s=0.5,
                          retry_s=0.1)
    carrier = CourierArbiter(courier, "deny", SYSTEM_CLOCK, host="host-a", node="courier-a")
    try:
        pending = carrier.decide(an_ask(1))
        await wait_for(lambda: len(person.held) == 1, what="the ask before the person up there")
        cut.open.clear()  # the courier alone loses the broker
        read = await pending
        assert isinstance(read, Decision) and read.outcome == "fail-safe"  # what its child reads
        person.release(next(iter(person.held)), "allow")
        await wait_for(lambda: [r.written for r in history.query()] == [1], what="the approval written")
        cut.open.set()  # the courier's owed withdrawal, then its late note
        await wait_for(lambda: [r.written for r in history.query()] == [0], within=20,
                       what="the approver's row told the verdict was not delivered")
        assert approver.early == [0]  # the early read happened: the note was read again
    finally:
        await carrier.close()
        await cut.close()
        await approver.close()
        history.close()


async def test_the_couriers_row_names_the_broker_and_the_approver_that_decided(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """Finding 6: the courier's history said "carried to session:<its own session>" for a nats target
    (the approver answers as the courier's session). It names the broker and the approver now: an
    approver whose signature the courier verified under its `[approvers]` list."""
    (tmp_path / "root").mkdir()
    agent = tmp_path / "agent"
    (agent / "extensions" / "pi-permission-system").mkdir(parents=True)
    (agent / "extensions" / "pi-permission-system" / "config.json").write_text('{"permission": {}}')
    target = Target("nats", nats_server.url.removeprefix("nats://"))
    key_b = node_key(tmp_path / "state-b", "node-b")
    options = NodeOptions(tmp_path / "root", tmp_path / "state-c", agent, tmp_path / "project",
                          forward_to=target, node_name="node-c",
                          broker_access=BrokerAccess(approvers=((key_b.public, "node-b"),)))
    history_c = HistoryStore.in_state_dir(tmp_path / "state-c")
    courier = build_node(options, history_c, DenyingArbiter())
    approver = BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(),
                           arbiter=ScriptedArbiter("person", lambda ask: "deny"), node_key=key_b)
    await approver.start()
    try:
        async with serving_session(courier.core, COURIER_SESSION):
            write_request(tmp_path / "root", COURIER_SESSION, "carried")
            answer = await read_response_when_done(tmp_path / "root", COURIER_SESSION, "carried")
            assert answer["denialReason"] == "denied by person"
            await wait_for(lambda: [r.written for r in history_c.query()] == [1], what="C's row")
    finally:
        await approver.close()
    [row] = history_c.query()
    assert row.outcome == "courier"
    assert row.decider == (f"carried to {nats_server.url} (approver node-b, verified), decided there by "
                           "person (dialog)")
    history_c.close()


async def test_a_refused_parcel_is_recorded_with_its_reason_as_a_quarantined_file_is(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    history = HistoryStore.in_state_dir(tmp_path / "approver")
    approver = BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(),
                           arbiter=ScriptedArbiter("person", lambda ask: "allow"), ledger=history,
                           observe=history.observe)
    await approver.start()
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await js.publish(ask_subject("host-a", SESSION), b"\xff not json")
        junk = Parcel("junk-1", b"{not json", (Hop("host-a", SESSION, "c"),), 9e12)
        await js.publish(ask_subject("host-a", SESSION), encode_parcel(junk))
        await wait_for(lambda: len([r for r in history.query() if r.outcome == "quarantined"]) == 2,
                       what="both refusals recorded")
        rows = {r.request_name: r for r in history.query() if r.outcome == "quarantined"}
        assert set(rows) == {"(no parcel id)", "junk-1"}
        assert all(r.reason and r.ended_at is not None for r in rows.values())
        assert rows["junk-1"].raw == b"{not json"  # the request's bytes, as a quarantined file's
    finally:
        await nc.close()
        await approver.close()
        history.close()
