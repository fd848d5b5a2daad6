"""A node's own key pair and what its signature proves: verdicts and withdrawals on the broker.

Anything on the broker is its writer's claim, and the broker's permissions say only which subject a
writer may touch, not who the writer is (a child reading its courier's access file writes with the
courier's credentials). So every node that joins a broker has an Ed25519 key pair, made at its first
start in its state dir, owner-only, in the NATS nkey format (`node.nk`: the same seed can authenticate
the node to a server configured for nkeys). An approver signs each verdict, a courier each withdrawal,
over everything that makes it this decision and no other (`Decision.payload`): the bucket key, the
parcel id, a digest of the parcel's bytes, the kind, the body (the response bytes exactly, which hold
the verdict and its reason; or the withdrawal's reason), the signer's name and the time. A reader
believes a decision, and names its decider, only when the signature verifies under a public key it
trusts (listed in its broker settings); anything else counts as no answer, with the reason.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import nacl.exceptions
import nacl.signing

from core.disk.private import NotPrivate, read_private

#: The seed file in the state dir.
SEED_FILE = "node.nk"
#: What a signature is over, so a signature made for anything else never verifies as a decision.
DOMAIN = "pi-authorizer decision v1"

_PREFIX_SEED = 18 << 3  # base32 "S…"
_PREFIX_USER = 20 << 3  # base32 "U…": a public key as NATS names a user's


class SigningRefused(ValueError):
    """A key or a signature this node cannot use; the message says why (one line)."""


def _crc16(data: bytes) -> int:
    """CRC-16/XMODEM, the checksum of the nkey encoding."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def _encode(prefix: bytes, raw: bytes) -> str:
    body = prefix + raw
    return base64.b32encode(body + _crc16(body).to_bytes(2, "little")).decode("ascii").rstrip("=")


def _decode(text: str) -> bytes:
    try:
        data = base64.b32decode(text + "=" * (-len(text) % 8))
    except (ValueError, TypeError) as exc:
        raise SigningRefused("not an nkey (base32)") from exc
    if len(data) < 4 or _crc16(data[:-2]) != int.from_bytes(data[-2:], "little"):
        raise SigningRefused("not an nkey (its checksum is wrong)")
    return data[:-2]


def encode_public(key: nacl.signing.VerifyKey) -> str:
    """A public key as text (`U…`, the nkey user form)."""
    return _encode(bytes([_PREFIX_USER]), bytes(key))


def decode_public(text: str) -> nacl.signing.VerifyKey:
    """A public key from its text; raises `SigningRefused` with why."""
    raw = _decode(text.strip())
    if len(raw) != 33 or raw[0] != _PREFIX_USER:
        raise SigningRefused("not an nkey user public key (U…)")
    return nacl.signing.VerifyKey(raw[1:])


def _encode_seed(seed: bytes) -> str:
    b1 = _PREFIX_SEED | (_PREFIX_USER >> 5)
    b2 = (_PREFIX_USER & 31) << 3
    return _encode(bytes([b1, b2]), seed)


def _decode_seed(text: str) -> bytes:
    raw = _decode(text.strip())
    if len(raw) != 34 or raw[0] & 248 != _PREFIX_SEED:
        raise SigningRefused("not an nkey seed (S…)")
    return raw[2:]


@dataclass(frozen=True)
class NodeKey:
    """This node's key pair: its name (what its decisions say `by`) and its signing key."""

    name: str
    signing: nacl.signing.SigningKey

    @property
    def public(self) -> str:
        return encode_public(self.signing.verify_key)

    def sign(self, decision: Decision) -> SignedDecision:
        if decision.by != self.name:
            raise SigningRefused(f"a decision by {decision.by!r} is not {self.name!r}'s to sign")
        signature = self.signing.sign(decision.payload()).signature
        return SignedDecision(decision, self.public, base64.b64encode(signature).decode("ascii"))


def node_key(state_dir: Path, name: str) -> NodeKey:
    """This node's key, made at its first start (`<state>/node.nk`, created owner-only, never replaced);
    refused when others may read it, or when it is not a small regular file."""
    path = state_dir / SEED_FILE
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return NodeKey(name, nacl.signing.SigningKey(_decode_seed(_read_private(path))))
    signing = nacl.signing.SigningKey.generate()
    try:
        os.write(fd, (_encode_seed(bytes(signing)) + "\n").encode("ascii"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
    return NodeKey(name, signing)


def new_seed() -> str:
    """A new key pair's seed, as `node.nk` holds it (nkey text, `S…`): `pi-authorizer broker` makes one
    per node it gives access to, so the trust lists it writes hold that node's public key."""
    return _encode_seed(bytes(nacl.signing.SigningKey.generate()))


def public_of(seed: str) -> str:
    """The public key (`U…`) of a seed's key pair; raises `SigningRefused` with why."""
    return encode_public(nacl.signing.SigningKey(_decode_seed(seed)).verify_key)


def read_node_key(path: Path, name: str) -> NodeKey:
    """The key pair whose seed is at `path` (named by an access file's `node_key`), refused as `node_key`
    refuses `node.nk`: readable by others, a link, not a small regular file, not a seed."""
    return NodeKey(name, nacl.signing.SigningKey(_decode_seed(_read_private(path))))


def _read_private(path: Path) -> str:
    try:
        return read_private(path, "node key", 4096).decode("ascii", "replace")
    except NotPrivate as exc:
        raise SigningRefused(str(exc)) from exc


Kind = Literal["verdict", "withdrawn"]


@dataclass(frozen=True)
class Decision:
    """One decision as signed: every field is covered by the signature."""

    #: The bucket key (`<host>.<sha256(parcel id)>`): a signature for one key never fits another.
    key: str
    parcel_id: str
    #: sha256 of the parcel's request bytes, hex: the verdict is for exactly what was shown.
    parcel_digest: str
    kind: Kind
    #: The response bytes exactly (a verdict: its state and reason) or the withdrawal's reason.
    body: str
    by: str
    at_ms: int

    def payload(self) -> bytes:
        fields = {"domain": DOMAIN, "key": self.key, "parcelId": self.parcel_id,
                  "parcelDigest": self.parcel_digest, "kind": self.kind, "body": self.body, "by": self.by,
                  "atMs": self.at_ms}
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def parcel_digest(request: bytes) -> str:
    return hashlib.sha256(request).hexdigest()


@dataclass(frozen=True)
class SignedDecision:
    decision: Decision
    #: The signer's public key, as text: which trusted key to check it under.
    signer: str
    #: The Ed25519 signature over `decision.payload()`, base64.
    signature: str

    def why_not(self, trusted: Mapping[str, str], *, key: str, parcel_id: str, digest: str) -> str | None:
        """Why this decision is not to be believed for the parcel (`None`: it is): signed by a key not
        in `trusted` (public key → the node name it stands for), a name other than that key's, a
        signature that does not verify, or a decision for another key, parcel or parcel bytes."""
        decision = self.decision
        name = trusted.get(self.signer)
        if name is None:
            return f"signed by a key this node does not trust ({self.signer[:16]}…)"
        if decision.by != name:
            return f"it says it is by {decision.by!r} but its key is {name!r}'s"
        if (decision.key, decision.parcel_id, decision.parcel_digest) != (key, parcel_id, digest):
            return "it was signed for another ask (key, parcel id or parcel bytes differ)"
        try:
            verify = decode_public(self.signer)
            verify.verify(decision.payload(), base64.b64decode(self.signature, validate=True))
        except (SigningRefused, nacl.exceptions.BadSignatureError, ValueError):
            return f"its signature does not verify under {name!r}'s key"
        return None
