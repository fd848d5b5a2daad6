"""The broker's layout on NATS JetStream, shared by couriers and approvers (`docs/remote.md` § The broker).

- Asks: one JetStream stream (`PIAUTH_ASKS`), a subject per courier host and session,
  `piauth.ask.<host>.<session>` (tokens encoded), a message per parcel published with the parcel id
  as `Nats-Msg-Id` so a courier carrying it again after a restart is deduplicated.
- Decisions: one KV bucket (`PIAUTH_DECISIONS`), one key per parcel, `<host>.<sha256(parcel id)>`,
  written only with KV `create`: the first of a verdict or a withdrawal wins, every later writer is
  refused and reads who won. The host token in the key is the one of the subject the ask was
  published on (never what the parcel claims), so a host's credentials can be scoped to its keys.

Everything read from the broker is untrusted: a parcel or a decision is decoded with bounds and
refused with a reason, never trusted for its claims beyond provenance.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import dataclasses
import hashlib
import json
import logging
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType, StreamConfig
from nats.js.kv import KeyValue

from core.courier.broker_access import BrokerAccess
from core.courier.signing import Decision, NodeKey, SignedDecision
from core.courier.transport import Hop, Parcel
from core.wire.base import strict_json_loads
from core.wire.limits import MAX_REQUEST_BYTES
from core.wire.request import MAX_HOP_NAME_CHARS, MAX_HOPS

log = logging.getLogger("pi_authorizer.broker")

ASK_STREAM = "PIAUTH_ASKS"
ASK_PREFIX = "piauth.ask"
DECISION_BUCKET = "PIAUTH_DECISIONS"
#: The subject a decision key's writes appear on (core NATS subscribers see them as they land).
DECISION_SUBJECT_PREFIX = f"$KV.{DECISION_BUCKET}"
#: How long asks and decisions stay on the broker: longer than any child waits.
RETENTION_S = 24 * 3600.0
#: The window in which the broker drops a parcel published again under the same id.
DEDUPE_WINDOW_S = 3600.0
#: A parcel on the wire: the request (base64 grows it by a third), the hops and a little JSON.
MAX_PARCEL_BYTES = MAX_REQUEST_BYTES * 2 + 64 * 1024
MAX_DECISION_BYTES = 64 * 1024
#: Values a decision key keeps (new buckets): the first, which is the decision, outlives a hostile
#: delete and rewrite. A bucket made with history 1 still works: its one value is read.
DECISION_HISTORY = 8
MAX_NAME = MAX_HOP_NAME_CHARS
#: Errors that mean "the broker did not answer now" (connection lost, timeout), as opposed to refusals.
BROKER_DOWN: tuple[type[BaseException], ...] = (
    nats.errors.Error,
    nats.js.errors.Error,
    OSError,
    TimeoutError,
)

_TOKEN_SAFE = re.compile(r"[A-Za-z0-9_-]")
_ADDRESS = re.compile(r"^nats://(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>[0-9]{1,5})$")


#: What a node can say of its broker (`core/courier/broker_health.py` tracks it).
BrokerStateName = Literal["connecting", "connected", "unreachable", "auth refused", "TLS failure",
                          "JetStream missing", "clock skew"]


class BrokerUnavailable(nats.errors.Error):
    """The broker could not be used, and why, in words for the person: one of the `BrokerStateName`s
    and a sentence naming the address and any key at fault, never a secret. A `nats.errors.Error`, so
    every caller that retries a broker out of reach retries this too."""

    def __init__(self, state: BrokerStateName, words: str) -> None:
        super().__init__(words)
        self.state: BrokerStateName = state
        self.words = words

    def __str__(self) -> str:
        return self.words


def unavailable(url: str, exc: BaseException, last: BaseException | None = None,
                user: str | None = None) -> BrokerUnavailable:
    """What `exc` (and the last error nats-py reported while connecting) says of the broker."""
    if isinstance(exc, BrokerUnavailable):
        return exc
    said = f"{exc} {last or ''}".lower()
    if isinstance(exc, ssl.SSLError) or isinstance(last, ssl.SSLError) or "ssl" in said or "tls" in said:
        why = last if isinstance(last, ssl.SSLError) else exc
        reason = getattr(why, "reason", None) or type(why).__name__
        return BrokerUnavailable("TLS failure", f"{url}: the TLS handshake failed ({reason}); check the "
                                 "access file's ca, cert and key")
    if "authorization violation" in said or "authentication" in said or \
            isinstance(last, nats.errors.AuthorizationError):
        who = f"user {user!r}" if user else "this node's credentials"
        return BrokerUnavailable("auth refused", f"{url} refused {who} (authorization violation): check the "
                                 "access file's user and password_file (or creds)")
    if isinstance(exc, nats.js.errors.ServiceUnavailableError | nats.errors.NoRespondersError):
        return BrokerUnavailable("JetStream missing", f"{url} has no JetStream: start nats-server with -js "
                                 "(or a jetstream block in its configuration)")
    return BrokerUnavailable("unreachable", f"{url} unreachable ({type(exc).__name__})")


class BrokerRefused(ValueError):
    """Something read from the broker is not usable; `reason` says why (the quarantine reason)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def broker_url(target: str) -> str:
    """`nats://HOST:PORT` checked (no credentials or paths in it); raises `ValueError` with why."""
    match = _ADDRESS.match(target)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise ValueError(f"{target!r} is not nats://HOST:PORT")
    return target


def token(text: str) -> str:
    """`text` as one subject token and KV key part: `[A-Za-z0-9_-]` kept, anything else `=XX` (UTF-8
    bytes), so distinct names never share a token and no name can add a `.`, `*` or `>`."""
    out = []
    for char in text:
        if _TOKEN_SAFE.fullmatch(char):
            out.append(char)
        else:
            out.extend(f"={byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out) or "="


def ask_subject(host: str, session_id: str) -> str:
    return f"{ASK_PREFIX}.{token(host)}.{token(session_id)}"


def host_token_of(subject: str) -> str:
    """The host token of an ask's subject (the broker enforced it; the parcel's claims are not)."""
    parts = subject.split(".")
    if len(parts) != 4 or ".".join(parts[:2]) != ASK_PREFIX:
        raise BrokerRefused(f"not an ask subject: {subject[:MAX_NAME]!r}")
    return parts[2]


def decision_key(host_token: str, parcel_id: str) -> str:
    """The parcel's one decision key: legal for any parcel id, scoped to the publishing host."""
    return f"{host_token}.{hashlib.sha256(parcel_id.encode('utf-8')).hexdigest()}"


def late_key(key: str) -> str:
    """Where a courier notes that it answered its child (its fallback) before the verdict that won
    `key` was written: beside the key, under the same host scope (written with `create` too)."""
    return f"{key}.late"


#: How an approver records its verdict that won a key after the courier had answered its child.
NOT_DELIVERED = "decided after the courier had answered its child: not delivered"
#: How a courier notes, beside the key, a verdict it read and did not relay (its signature is not one
#: its trust list believes, or it is unreadable), and how the approver's row then says it.
NOT_RELAYED = "not relayed by the courier, which did not believe it: not delivered"


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME:
        raise BrokerRefused(f"{what} is not a name of 1 to {MAX_NAME} characters")
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise BrokerRefused(f"{what} holds control characters")
    return value


def encode_parcel(parcel: Parcel) -> bytes:
    """A parcel on the wire: the request bytes exactly (base64), the hops and the deadline."""
    return json.dumps(
        {
            "v": 1,
            "parcelId": parcel.parcel_id,
            "request": base64.b64encode(parcel.request).decode("ascii"),
            "hops": [{"host": h.host, "session": h.session_id, "node": h.node} for h in parcel.hops],
            "deadlineMs": parcel.deadline_ms,
        },
        separators=(",", ":"),
    ).encode("utf-8")


def _object(data: bytes, limit: int, what: str) -> dict[str, Any]:
    if len(data) > limit:
        raise BrokerRefused(f"{what} is {len(data)} bytes, over the {limit}-byte limit")
    try:
        value = strict_json_loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BrokerRefused(f"{what} is not JSON: {str(exc)[:120]}") from exc
    if not isinstance(value, dict) or value.get("v") != 1:
        raise BrokerRefused(f"{what} is not a version-1 object")
    return value


def parcel_id_of(data: bytes) -> str | None:
    """The parcel id of an unusable parcel if one can be read, so it can still be answered with why."""
    try:
        return _name(_object(data, MAX_PARCEL_BYTES, "the parcel").get("parcelId"), "parcelId")
    except BrokerRefused:
        return None


def decode_parcel(data: bytes) -> Parcel:
    """A parcel read from the broker; raises `BrokerRefused` with why it is unusable."""
    obj = _object(data, MAX_PARCEL_BYTES, "the parcel")
    parcel_id = _name(obj.get("parcelId"), "parcelId")
    raw = obj.get("request")
    if not isinstance(raw, str):
        raise BrokerRefused("request is not base64 text")
    try:
        request = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BrokerRefused("request is not base64 text") from exc
    hops_in = obj.get("hops")
    if not isinstance(hops_in, list) or not 0 < len(hops_in) <= MAX_HOPS:
        raise BrokerRefused(f"hops is not a list of 1 to {MAX_HOPS} hops")
    hops = []
    for hop in hops_in:
        if not isinstance(hop, dict):
            raise BrokerRefused("a hop is not an object")
        hops.append(
            Hop(_name(hop.get("host"), "hop host"), _name(hop.get("session"), "hop session"),
                _name(hop.get("node"), "hop node"))
        )
    deadline = obj.get("deadlineMs")
    if isinstance(deadline, bool) or not isinstance(deadline, int | float) or not 0 <= deadline < 1e15:
        raise BrokerRefused("deadlineMs is not a time in milliseconds")
    return Parcel(parcel_id=parcel_id, request=request, hops=tuple(hops), deadline_ms=float(deadline))


DecisionKind = Literal["verdict", "withdrawn"]


@dataclass(frozen=True)
class BrokerDecision:
    """What the decision key of a parcel holds: a verdict (the response bytes exactly as the approver
    wrote them) or a withdrawal, and who its writer says wrote it (a claim until `why_not` says the
    signature verifies under a trusted key: `core/courier/signing.py`)."""

    kind: DecisionKind
    by: str
    #: The response body (verdict) or the reason (withdrawal).
    body: str
    #: The signer's public key (`U…`) and its Ed25519 signature (base64); empty when unsigned.
    signer: str = ""
    signature: str = ""
    #: What the signature covers besides the above: the parcel id, sha256 of its request bytes, the time.
    parcel_id: str = ""
    parcel_digest: str = ""
    at_ms: int = 0
    #: Set by a reader whose trust lists do not cover the signature: `by` is only its writer's claim.
    claimed: bool = False

    def encode(self) -> bytes:
        fields: dict[str, object] = {"v": 1, "kind": self.kind, "by": self.by, "body": self.body}
        if self.signer:
            fields.update(signer=self.signer, signature=self.signature, parcelId=self.parcel_id,
                          parcelDigest=self.parcel_digest, atMs=self.at_ms)
        return json.dumps(fields, separators=(",", ":")).encode("utf-8")

    def signed(self, node_key: NodeKey, key: str, parcel_id: str, digest: str, at_ms: int) -> BrokerDecision:
        """This decision signed by `node_key` (its `by` must be that node's name) for the key and parcel."""
        signed = node_key.sign(Decision(key, parcel_id, digest, self.kind, self.body, self.by, at_ms))
        return BrokerDecision(self.kind, self.by, self.body, signed.signer, signed.signature, parcel_id,
                              digest, at_ms)

    def why_not(self, trusted: Mapping[str, str], key: str, parcel_id: str, digest: str) -> str | None:
        """Why this decision is not its `by`'s for this parcel (`None`: its signature verifies under a
        key in `trusted`, public key → name, for exactly this key, parcel id and parcel bytes)."""
        if not self.signer:
            return "it is not signed"
        # the key is the one it was read from: a signature copied under another key does not verify
        decision = Decision(key=key, parcel_id=self.parcel_id, parcel_digest=self.parcel_digest,
                            kind=self.kind, body=self.body, by=self.by, at_ms=self.at_ms)
        return SignedDecision(decision, self.signer, self.signature).why_not(
            trusted, key=key, parcel_id=parcel_id, digest=digest)

    @property
    def words(self) -> str:
        """How a loser of the race is told (the arbiter's withdrawal reason)."""
        if self.claimed:
            what = "withdrawn by" if self.kind == "withdrawn" else "decided elsewhere by"
            return f"{what} an unverified writer (claims to be {self.by[:MAX_NAME]!r})" + \
                (f": {self.body}" if self.kind == "withdrawn" else "")
        if self.kind == "withdrawn":
            return f"withdrawn by the courier at {self.by}: {self.body}"
        return f"decided elsewhere by {self.by}"

    def words_for(self, node: str) -> str:
        """`words`, as node `node` says it (its own verdict, seen again after a restart, is no race lost)."""
        mine = self.kind == "verdict" and self.by == node and not self.claimed
        return "already answered by this node" if mine else self.words

    def unverified(self) -> BrokerDecision:
        """This decision with its writer's name kept only as a claim (its signature did not verify
        under a trusted key; the reader logs why)."""
        return dataclasses.replace(self, claimed=True)


def decode_decision(data: bytes) -> BrokerDecision:
    obj = _object(data, MAX_DECISION_BYTES, "the decision")
    kind, body = obj.get("kind"), obj.get("body")
    if kind not in ("verdict", "withdrawn") or not isinstance(body, str):
        raise BrokerRefused("the decision is neither a verdict nor a withdrawal")
    by = _name(obj.get("by"), "the decider")
    if "signer" not in obj:
        return BrokerDecision(kind=kind, by=by, body=body)
    signer, signature, parcel_id, digest, at_ms = (obj.get(k) for k in (
        "signer", "signature", "parcelId", "parcelDigest", "atMs"))
    for value, what in ((signer, "signer"), (signature, "signature"), (digest, "parcelDigest")):
        if not isinstance(value, str) or not 0 < len(value) <= 200:
            raise BrokerRefused(f"the decision's {what} is not text of 1 to 200 characters")
    if isinstance(at_ms, bool) or not isinstance(at_ms, int) or not 0 <= at_ms < 10**15:
        raise BrokerRefused("the decision's atMs is not a time in milliseconds")
    assert isinstance(signer, str) and isinstance(signature, str) and isinstance(digest, str)
    return BrokerDecision(kind=kind, by=by, body=body, signer=signer, signature=signature,
                          parcel_id=_name(parcel_id, "the decision's parcelId"), parcel_digest=digest,
                          at_ms=at_ms)


@dataclass
class BrokerLink:
    """One connection to the broker with its JetStream context and the decisions bucket."""

    nc: Client
    js: JetStreamContext
    decisions: KeyValue

    async def close(self) -> None:
        if not self.nc.is_closed:
            await self.nc.close()


async def connect(url: str, *, timeout_s: float, name: str, access: BrokerAccess | None = None) -> BrokerLink:
    """Connect (one attempt bounded by `timeout_s`; once up, nats-py reconnects on its own forever)
    and make sure the stream and the bucket exist (idempotent: every node may be first)."""
    # Bounded here too: nats-py's own timeout does not cover every way a connect can stall (a server
    # that requires TLS, met without it, never completes the handshake).
    last: collections.deque[Exception] = collections.deque(maxlen=1)

    async def seen(error: Exception) -> None:
        # The most telling error of the attempts is kept: a server that refused the credentials (or
        # the TLS handshake) and then reset the connection was not merely out of reach.
        if not last or unavailable(url, last[0]).state == "unreachable" or \
                unavailable(url, error).state != "unreachable":
            last.append(error)
        await _quiet(error)

    user = access.user if access is not None else None
    try:
        nc = await _connect(url, name, timeout_s, seen, access)
    except (nats.errors.Error, nats.js.errors.Error, OSError, TimeoutError) as exc:  # BROKER_DOWN
        raise unavailable(url, exc, last[0] if last else None, user) from exc
    nc.options["max_reconnect_attempts"] = -1
    try:
        js = nc.jetstream(timeout=timeout_s)
        await _ensure_stream(js)
        decisions = await _ensure_bucket(js)
    except (nats.js.errors.ServiceUnavailableError, nats.errors.NoRespondersError) as exc:
        await nc.close()
        raise unavailable(url, exc) from exc
    except BaseException:
        await nc.close()
        raise
    return BrokerLink(nc=nc, js=js, decisions=decisions)


async def _connect(url: str, name: str, timeout_s: float, seen: Callable[[Exception], Awaitable[None]],
                   access: BrokerAccess | None) -> Client:
    return await asyncio.wait_for(nats.connect(
        servers=[url],
        name=name,
        connect_timeout=max(1, int(timeout_s)),
        allow_reconnect=True,
        # nats-py applies this to the first connect too, where "forever" would hang the caller: one
        # retry there, then unbounded once connected (a broker restarted is found again).
        max_reconnect_attempts=1,
        reconnect_time_wait=0.2,
        ping_interval=5,
        max_outstanding_pings=2,
        error_cb=seen,
        **(access.connect_options() if access is not None else {}),
    ), timeout=max(1.0, timeout_s) + 0.5)


async def _quiet(error: Exception) -> None:
    """nats-py's connection errors: the callers report what a broker out of reach means for an ask."""
    log.debug("nats: %s", error)


async def _ensure_stream(js: JetStreamContext) -> None:
    try:
        await js.stream_info(ASK_STREAM)
    except nats.js.errors.NotFoundError:
        await js.add_stream(
            StreamConfig(
                name=ASK_STREAM,
                subjects=[f"{ASK_PREFIX}.>"],
                storage=StorageType.FILE,
                max_age=RETENTION_S,
                duplicate_window=DEDUPE_WINDOW_S,
                max_msg_size=MAX_PARCEL_BYTES,
            )
        )


async def _ensure_bucket(js: JetStreamContext) -> KeyValue:
    try:
        return await js.key_value(DECISION_BUCKET)
    except nats.js.errors.BucketNotFoundError:
        return await js.create_key_value(
            KeyValueConfig(
                bucket=DECISION_BUCKET,
                # the first value stays readable after a later delete or write (`read_first_decision`)
                history=DECISION_HISTORY,
                ttl=RETENTION_S,
                storage=StorageType.FILE,
                max_value_size=MAX_DECISION_BYTES,
                # reads by key on a subject of their own, so a host's permissions can scope them
                direct=True,
            )
        )


async def create_decision(kv: KeyValue, key: str, decision: BrokerDecision) -> BrokerDecision | None:
    """Write `decision` if the key holds none; else the decision that won (`None`: we won)."""
    try:
        await kv.create(key, decision.encode())
        return None
    except nats.js.errors.KeyWrongLastSequenceError:
        won = await read_decision(kv, key)
        return won if won is not None else BrokerDecision("verdict", "an unreadable writer", "")


async def read_first_decision(js: JetStreamContext, key: str) -> BrokerDecision | None:
    """The first value the key's history still holds (`None` if none): the decision, whatever was
    deleted or written after it (a create-only writer can only follow a delete; a purge erases the
    history, and then the approver's own memory of what it settled stands). Direct gets by subject, so
    only an approver's permissions (the whole JetStream API) allow it; a courier reads its own keys'
    history through a scoped consumer (`core/courier/broker_history.py`)."""
    subject = f"{DECISION_SUBJECT_PREFIX}.{key}"
    seq = 1
    for _ in range(DECISION_HISTORY * 2):
        try:
            msg = await js.get_msg(f"KV_{DECISION_BUCKET}", seq=seq, subject=subject, direct=True, next=True)
        except nats.js.errors.NotFoundError:
            return None
        if (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE") or msg.seq is None:
            seq = (msg.seq or seq) + 1
            continue
        try:
            return decode_decision(msg.data or b"")
        except BrokerRefused as exc:
            return BrokerDecision("withdrawn", "an unknown writer", f"an unreadable decision ({exc.reason})")
    return BrokerDecision("withdrawn", "an unknown writer", "a decision key deleted and rewritten too often")


async def read_decision(kv: KeyValue, key: str) -> BrokerDecision | None:
    """The decision a key holds, `None` if none yet; an unreadable one counts as withdrawn (nobody
    may answer over it, and nobody relays it)."""
    try:
        entry = await kv.get(key)
    except nats.js.errors.KeyNotFoundError:
        return None
    try:
        return decode_decision(entry.value or b"")
    except BrokerRefused as exc:
        return BrokerDecision("withdrawn", "an unknown writer", f"an unreadable decision ({exc.reason})")
