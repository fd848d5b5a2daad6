"""The broker's faults on a real nats-server: the broker killed and restarted mid-run, an approver
killed with SIGKILL halfway and restarted. Nothing is lost, nothing answered twice.

Each takes 2–6 s, for reasons: a real server restarted (its clients reconnect), two approver processes
started, and the consumer's ack wait (1 s here) before a killed node's asks come back."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from core.courier.broker import DECISION_BUCKET, decision_key, token
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.history import HistoryStore
from core.serving.judgment import NoRecordedAuthority
from core.testing import ScriptedArbiter
from tests.helpers import NatsServer, broker_parcel, wait_for


async def one_verdict_each(server: NatsServer, parcel_ids: list[str]) -> list[str]:
    """Who wrote each parcel's one decision (and that it has exactly one)."""
    nc = await nats.connect(server.url)
    try:
        js = nc.jetstream()
        kv = await js.key_value(DECISION_BUCKET)
        writers = []
        for parcel_id in parcel_ids:
            stored = json.loads((await kv.get(decision_key(token("host-a"), parcel_id))).value or b"")
            assert stored["kind"] == "verdict"
            writers.append(stored["by"])
        # every write the bucket ever took: one per parcel (a second writer never got in)
        assert (await js.stream_info(f"KV_{DECISION_BUCKET}")).state.last_seq == len(parcel_ids)
        return writers
    finally:
        await nc.close()


@pytest.mark.timeout(60)
async def test_the_broker_restarted_mid_run_loses_nothing_and_answers_nothing_twice(
    nats_server: NatsServer,
) -> None:
    person = ScriptedArbiter("person", lambda ask: "allow" if int(ask.key.name[-1]) % 2 == 0 else None)
    other = ScriptedArbiter("other", lambda ask: None)
    inboxes = [BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(), arbiter=person),
               BrokerInbox(nats_server.url, node="node-c", judge=NoRecordedAuthority(), arbiter=other)]
    for inbox in inboxes:
        await inbox.start()
    courier = NatsCourier(nats_server.url, node="courier-a", unreachable_after_s=30.0)
    parcels = [broker_parcel(f"restart-{n}") for n in range(20)]
    carried = [asyncio.create_task(courier.carry(p)) for p in parcels]
    try:
        await wait_for(lambda: sum(t.done() for t in carried) == 10, what="the even half answered")
        await wait_for(lambda: len(person.held) == 10, what="the odd half before the person")
        await wait_for(lambda: len(other.held) == 10, what="the odd half before the other")
        nats_server.restart()
        for key in list(person.held):
            person.release(key, "allow")
        late = [broker_parcel(f"late-{n}") for n in (0, 2, 4, 6)]  # even: the person approves at once
        relayed = await asyncio.gather(*carried, *(courier.carry(p) for p in late))
        assert all(r.response.approved for r in relayed)
        ids = [p.parcel_id for p in parcels + late]
        assert await one_verdict_each(nats_server, ids) == ["node-b"] * len(ids)
        await wait_for(lambda: {s.parcel_id for s in inboxes[1].stats.settled} == set(ids),
                       what="node-c settled each")
        # no trust lists: node-b's claim
        claimed = "decided elsewhere by an unverified writer (claims to be 'node-b')"
        assert {s.words for s in inboxes[1].stats.settled} == {claimed}
        assert set(other.withdrawn.values()) == {claimed}
    finally:
        await courier.close()
        for inbox in inboxes:
            await inbox.close()


@pytest.mark.timeout(60)
async def test_an_approver_killed_halfway_and_restarted_answers_every_ask_once(
    nats_server: NatsServer,
) -> None:
    def approver(mode: str) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.courier.approver_child", nats_server.url, "node-b", mode],
            stdout=subprocess.PIPE, text=True,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        return child

    first = approver("even")
    courier = NatsCourier(nats_server.url, node="courier-a")
    parcels = [broker_parcel(f"kill-{n}") for n in range(20)]
    carried = [asyncio.create_task(courier.carry(p)) for p in parcels]
    second = None
    try:
        await wait_for(lambda: sum(t.done() for t in carried) == 10, what="the even half answered")
        first.kill()
        first.wait(10)
        assert not any(carried[n].done() for n in range(1, 20, 2))
        second = approver("all")
        relayed = await asyncio.gather(*carried)
        assert all(r.response.approved for r in relayed)
        ids = [p.parcel_id for p in parcels]
        assert await one_verdict_each(nats_server, ids) == ["node-b"] * len(ids)
    finally:
        await courier.close()
        for child in (first, second):
            if child is not None and child.poll() is None:
                child.kill()
                child.wait(10)


async def test_an_approver_restarted_after_others_decided_its_open_asks_closes_their_rows(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """An approver killed while asks wait before its person leaves their history rows open; another
    approver decides them meanwhile. Restarted, it is handed them again, finds them decided and ends
    those rows "decided elsewhere by" the other: none stays open (they used to, forever)."""
    state = tmp_path / "state-b"

    def approver(node: str, mode: str, *extra: str) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.courier.approver_child", nats_server.url, node, mode, *extra],
            stdout=subprocess.PIPE, text=True,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        return child

    children = [approver("node-b", "even", str(state))]
    courier = NatsCourier(nats_server.url, node="courier-a")
    parcels = [broker_parcel(f"open-{n}") for n in range(6)]
    carried = [asyncio.create_task(courier.carry(p)) for p in parcels]
    try:
        await wait_for(lambda: sum(t.done() for t in carried) == 3, what="the even half answered by node-b")
        history = HistoryStore.in_state_dir(state)
        try:
            await wait_for(lambda: len(history.query()) == 6, what="node-b's rows, the odd half open")
        finally:
            history.close()
        children[0].kill()
        children[0].wait(10)
        children.append(approver("node-c", "all"))
        await asyncio.gather(*carried)
        children.append(approver("node-b", "all", str(state)))

        def closed() -> bool:
            store = HistoryStore.in_state_dir(state)
            try:
                return all(row.ended_at is not None for row in store.query())
            finally:
                store.close()

        await wait_for(closed, what="node-b's open rows ended once it was handed them again")
        store = HistoryStore.in_state_dir(state)
        try:
            rows = {row.request_name: row for row in store.query()}
        finally:
            store.close()
        assert len(rows) == 6
        for n in range(1, 6, 2):
            row = rows[f"open-{n}"]
            claimed = "decided elsewhere by an unverified writer (claims to be 'node-c')"
            assert row.outcome == "withdrawn" and row.reason == claimed, row
    finally:
        await courier.close()
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(10)

