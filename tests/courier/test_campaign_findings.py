"""Findings of the broker campaign (`bench/campaign_broker.py`, issues 32/33), each reduced to real
processes on a real nats-server, waiting for conditions, never for time.

A courier that answered its child with its fallback before the approver's verdict won notes it in
the key's `.late` key, so the approver records its verdict "not delivered". The approver learns of
that note only from the core-NATS notice of the write (at most once) while the key is in its memory
of won keys: an approver away when the note is written (disconnected by a broker restart, or killed
and restarted) keeps a row that says its approval was delivered to a child that read a denial
(campaign seed 3: 8 of 2,134 asks, the broker killed 6 times and paused 8 times).

A courier killed after carrying an ask, whose child gives up before it is restarted, closes its row
at restart ("the request file was gone when serving resumed") and tells the broker nothing: the
approver's verdict, already written, stays recorded as delivered although the child read nothing
(campaign seed 5: 2 of 2,423 asks, courier-1 killed 6 times).

A courier that was itself stopped (SIGSTOP, a laptop asleep) counts its own absence as the broker's:
its first failed read after it runs again finds its last success more than `unreachable_after_s` ago
and answers the fallback at once, though the verdict has waited in the bucket all along (campaign
seed 8: 23 asks, courier-1 stopped 10 s while the approvers decided; the approvers then missed the
late notes, finding 1).

All three are fixed (docs/design/reliability.md, Campaigns): late notes read again after a reconnect,
an earlier run's carried asks withdrawn at a courier's start, the unreachable limit counted from the
first failure after a success.

A courier killed after its fallback answered, while its withdrawal was still owed (the broker out of
its reach), forgot the ask: campaign2 finding A (seed 11), fixed by keeping the carried ask until
the owed withdrawal is written, so the restarted courier withdraws it and notes the verdict.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import nats
import pytest
from nacl.signing import SigningKey

from core.clock import SYSTEM_CLOCK
from core.courier.arbiter import CourierArbiter
from core.courier.broker import DECISION_BUCKET, NOT_DELIVERED
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.courier.signing import NodeKey
from core.history import HistoryStore
from core.serving.judgment import NoRecordedAuthority
from core.testing import ManualClock, ScriptedArbiter
from core.vocabulary.asks import Ask, AskKey, Decision, Judgment
from core.wire.reader import parse_request
from tests.helpers import (
    NatsServer,
    bash_intent,
    broker_parcel,
    request_body,
    wait_for,
    wait_for_async,
    write_request_bytes,
)

SESSION = "sess-1"
REPO = Path(__file__).resolve().parents[2]


class Relay:
    """A TCP relay between one client and the broker. `cut()` closes the client's connections and
    refuses new ones until `restore()`: what the client misses meanwhile is lost to it, as across a
    broker restart (unlike a paused wire, whose bytes arrive late)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.up = True
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._pair, "127.0.0.1", 0)
        return f"nats://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _pair(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers |= {writer, up_writer}
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self.tasks.add(task)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        sink.close()

    def cut(self) -> None:
        self.up = False
        for writer in self.writers:
            writer.close()
        self.writers.clear()

    def restore(self) -> None:
        self.up = True

    async def close(self) -> None:
        self.cut()
        for task in self.tasks:
            task.cancel()
        if self.server is not None:
            self.server.close()


def an_ask(n: int) -> Ask:
    body = request_body(f"late-{n}", SESSION)
    parsed = parse_request(json.dumps(body).encode())
    return Ask(AskKey(SESSION, f"late-{n}.json"), parsed, Judgment("ask"), time.time(), 600_000, SESSION)


async def late_noted(server: NatsServer) -> bool:
    """A `.late` key is in the bucket: a courier's note that a verdict won after its fallback."""
    nc = await nats.connect(server.url)
    try:
        kv = await nc.jetstream().key_value(DECISION_BUCKET)
        try:
            return any(k.endswith(".late") for k in await kv.keys())
        except nats.js.errors.NoKeysError:
            return False
    finally:
        await nc.close()


def approver_on(url: str, history: HistoryStore, person: ScriptedArbiter, key: NodeKey) -> BrokerInbox:
    """Node `node-b` with its key (a restarted node keeps its own: `<state>/node.nk`)."""
    return BrokerInbox(url, node="node-b", judge=NoRecordedAuthority(), arbiter=person, request_timeout_s=0.5,
                       retry_s=0.1, ledger=history, observe=history.observe, node_key=key)


@pytest.mark.parametrize("away", ["disconnected", "restarted"])
@pytest.mark.timeout(120)
async def test_a_late_note_written_while_the_approver_was_away_still_lowers_its_row(
    nats_server: NatsServer, tmp_path: Path, away: str
) -> None:
    history = HistoryStore.in_state_dir(tmp_path / "approver")
    person = ScriptedArbiter("person", lambda ask: None)
    approver_wire = Relay(nats_server.port)
    approver_url = await approver_wire.start()
    node_key = NodeKey("node-b", SigningKey.generate())
    approver = approver_on(approver_url, history, person, node_key)
    await approver.start()
    courier_wire = Relay(nats_server.port)
    courier = NatsCourier(await courier_wire.start(), node="courier-a", unreachable_after_s=1.0,
                          request_timeout_s=0.5, retry_s=0.1)
    carrier = CourierArbiter(courier, "deny", SYSTEM_CLOCK, host="host-a", node="courier-a")
    try:
        pending = carrier.decide(an_ask(1))
        await wait_for(lambda: len(person.held) == 1, what="the ask before the person up there")
        courier_wire.cut()  # the courier alone loses the broker and answers its child the fallback
        read = await pending
        assert isinstance(read, Decision) and read.outcome == "fail-safe" and not read.response.approved
        person.release(next(iter(person.held)), "allow")  # the approver still reaches the broker
        await wait_for(lambda: [r.written for r in history.query()] == [1], what="the approval written")

        if away == "disconnected":
            approver_wire.cut()  # the approver's connection drops (as when the broker restarts)
        else:
            await approver.close()  # the approver is stopped (killed, its memory gone)
        courier_wire.restore()  # the courier's owed withdrawal meets the verdict: it writes its note
        await wait_for_async(lambda: late_noted(nats_server), within=60, what="the courier's late note")
        if away == "disconnected":
            approver_wire.restore()
        else:
            person = ScriptedArbiter("person", lambda ask: None)
            approver = approver_on(approver_url, history, person, node_key)  # its key kept, as serve's
            await approver.start()

        # The approver is back and serving: a second ask reaches its person and is decided.
        second = carrier.decide(an_ask(2))
        await wait_for(lambda: len(person.held) == 1, within=60, what="the approver serving again")
        person.release(next(iter(person.held)), "deny")
        await second
        closed = lambda: [r.ended_at is not None for r in history.query()] == [True, True]  # noqa: E731
        await wait_for(closed, what="both rows closed")
        first = next(r for r in history.query() if r.request_id == "late-1")
        # The child read the fallback denial: the approver's row must not say its approval was delivered.
        assert first.verdict == "approved" and first.written == 0, first
        assert first.reason is not None and NOT_DELIVERED in first.reason, first
    finally:
        await carrier.close()
        await approver.close()
        await courier_wire.close()
        await approver_wire.close()
        history.close()



def courier_process(tmp_path: Path, url: str) -> subprocess.Popen[bytes]:
    """`pi-authorizer serve --forward-to nats://…` for session `courier-c` (its state kept across runs)."""
    rules = tmp_path / "courier-rules.json"
    rules.write_text(json.dumps({"permission": {}}))
    command = [sys.executable, "-m", "tui.cli", "serve", "--session", "courier-c", "--forward-to", url,
               "--forwarding-root", str(tmp_path / "root"), "--create",
               "--state-dir", str(tmp_path / "courier"), "--rules", str(rules),
               "--agent-dir", str(tmp_path), "--project", str(tmp_path)]
    with (tmp_path / "courier.log").open("ab") as log:
        return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def courier_rows(tmp_path: Path) -> list[tuple[str, str, object]]:
    path = tmp_path / "courier" / "history.sqlite3"
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT request_id, outcome, ended_at FROM asks ORDER BY id").fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()


@pytest.mark.timeout(180)
async def test_a_verdict_for_a_child_that_gave_up_while_its_courier_was_down_is_recorded_not_delivered(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    history = HistoryStore.in_state_dir(tmp_path / "approver")
    person = ScriptedArbiter("person", lambda ask: None)
    approver = approver_on(nats_server.url, history, person, NodeKey("node-b", SigningKey.generate()))
    await approver.start()
    courier = courier_process(tmp_path, nats_server.url)
    requests = tmp_path / "root" / "sessions" / "courier-c" / "requests"
    try:
        body = request_body("gave-up", "courier-c", accessIntent=bash_intent("ls gave-up"))
        write_request_bytes(tmp_path / "root", "courier-c", "gave-up.json", json.dumps(body).encode())
        await wait_for(lambda: len(person.held) == 1, within=120, what="the ask before the person up there")
        await wait_for(lambda: len(courier_rows(tmp_path)) == 1, what="the courier's row of the ask")
        os.kill(courier.pid, signal.SIGKILL)  # the courier dies with the ask carried
        courier.wait(30)
        person.release(next(iter(person.held)), "allow")
        await wait_for(lambda: [r.written for r in history.query()] == [1], what="the approval written")
        (requests / "gave-up.json").unlink()  # its child stops waiting: it read nothing
        courier = courier_process(tmp_path, nats_server.url)
        closed = [("gave-up", "withdrawn")]
        await wait_for(lambda: [(r[0], r[1]) for r in courier_rows(tmp_path) if r[2] is not None] == closed,
                       within=120, what="the courier's row closed at its restart")
        # The child read nothing: the approver's row must not say its approval was delivered.
        await wait_for(lambda: [r.written for r in history.query()] == [0], within=30,
                       what="the approver's row told the verdict was not delivered")
    finally:
        if courier.poll() is None:
            courier.send_signal(signal.SIGTERM)
            courier.wait(60)
        await approver.close()
        history.close()


@pytest.mark.timeout(90)
async def test_a_courier_that_was_itself_stopped_reads_the_verdict_before_giving_up(
    nats_server: NatsServer,
) -> None:
    person = ScriptedArbiter("person", lambda ask: None)
    approver = BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(), arbiter=person,
                           request_timeout_s=0.5, retry_s=0.1)
    await approver.start()
    clock = ManualClock(wall=time.time())
    wire = Relay(nats_server.port)
    courier = NatsCourier(await wire.start(), node="courier-a", clock=clock, unreachable_after_s=10.0,
                          request_timeout_s=0.5, retry_s=0.1)
    carried = asyncio.ensure_future(courier.carry(broker_parcel("stopped")))
    try:
        await wait_for(lambda: len(person.held) == 1, what="the ask before the person up there")
        await wait_for(lambda: clock.waiting >= 1, what="the courier waiting for the verdict")
        wire.cut()  # while the courier is stopped its connection is of no use
        person.release(next(iter(person.held)), "allow")
        await wait_for(lambda: len(approver.stats.settled) == 1, what="the approval in the bucket")
        clock.advance(11.0)  # the courier stopped for 11 s: its clock moved on, it did not try
        await wait_for(lambda: carried.done() or (courier.health.state.trouble and clock.waiting >= 1),
                       what="the courier's first read after it runs again failed")
        wire.restore()
        while not carried.done():  # its retries, each on its clock, until the read works
            await wait_for(lambda: carried.done() or clock.pending >= 1, what="the courier retrying")
            if not carried.done():
                clock.advance(0.1)  # taken once the woken wait has ended: a new wait is then pending
        relayed = carried.result()
        assert relayed.response.approved is True, relayed
    finally:
        carried.cancel()
        await courier.close()
        await wire.close()
        await approver.close()


@pytest.mark.timeout(180)
async def test_a_withdrawal_owed_by_a_courier_killed_after_its_fallback_still_lowers_the_approvers_row(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    history = HistoryStore.in_state_dir(tmp_path / "approver")
    person = ScriptedArbiter("person", lambda ask: None)
    approver = approver_on(nats_server.url, history, person, NodeKey("node-b", SigningKey.generate()))
    await approver.start()
    wire = Relay(nats_server.port)  # the courier's way to the broker (the campaign paused the broker)
    url = await wire.start()
    courier = courier_process(tmp_path, url)
    session = tmp_path / "root" / "sessions" / "courier-c"
    try:
        body = request_body("owed", "courier-c", accessIntent=bash_intent("ls owed"))
        write_request_bytes(tmp_path / "root", "courier-c", "owed.json", json.dumps(body).encode())
        await wait_for(lambda: len(person.held) == 1, within=120, what="the ask before the person up there")
        wire.cut()  # the courier alone loses the broker
        person.release(next(iter(person.held)), "allow")  # the approver still reaches it
        await wait_for(lambda: [r.written for r in history.query()] == [1], what="the approval written")
        response = session / "responses" / "owed.json"
        await wait_for(response.exists, within=90, what="the courier's fallback answer")
        assert json.loads(response.read_bytes())["approved"] is False  # the child reads a denial
        response.unlink()  # and removes both files, as a pi child does
        (session / "requests" / "owed.json").unlink(missing_ok=True)
        os.kill(courier.pid, signal.SIGKILL)  # before the broker answers it again: its withdrawal was owed
        courier.wait(30)
        wire.restore()
        courier = courier_process(tmp_path, url)
        # The child read the fallback denial: the approver's row must not say its approval was delivered.
        await wait_for(lambda: [r.written for r in history.query()] == [0], within=45,
                       what="the approver's row told the verdict was not delivered")
    finally:
        if courier.poll() is None:
            courier.send_signal(signal.SIGTERM)
            courier.wait(60)
        await approver.close()
        await wire.close()
        history.close()
