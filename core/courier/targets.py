"""`--forward-to TARGET`: the one parser of courier targets, and the builders of their transports.

A target is `session:ID` (another session's inbox under this node's forwarding root) or
`nats://HOST:PORT` (a NATS JetStream broker). Each scheme has one builder in `BUILDERS`; a transport
added later registers its builder there and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from core.clock import Clock
from core.courier.broker import broker_url
from core.courier.broker_access import BrokerAccess, node_key_of
from core.courier.nats_courier import NatsCourier
from core.courier.session import SessionCourier
from core.courier.signing import SigningRefused
from core.courier.transport import Courier
from core.disk.paths import InvalidSessionId, normalize_session_id


class TargetError(ValueError):
    """A target this node cannot carry asks to; the message is one line for the command line."""


@dataclass(frozen=True)
class Target:
    """A parsed target: its scheme (`session`, `nats`) and the rest, as the person wrote it."""

    scheme: str
    address: str

    def __str__(self) -> str:
        return f"session:{self.address}" if self.scheme == "session" else f"{self.scheme}://{self.address}"


@dataclass(frozen=True)
class CourierPlace:
    """What a transport is built with: this node's forwarding root, clock and name (its hops, its
    broker connection)."""

    root: Path
    clock: Clock
    node: str = "pi-authorizer"
    #: Credentials and TLS for a broker target (`--broker-access`).
    access: BrokerAccess | None = None
    #: This node's state dir, where its key is (`core/courier/signing.py`); None: a key for this run.
    state_dir: Path | None = None


Builder = Callable[[Target, CourierPlace], Courier]


def parse_target(text: str, own_sessions: Collection[str] = ()) -> Target:
    """The target named by `--forward-to`; raise `TargetError` for an unknown scheme, a malformed
    address, or this node's own session (it would carry its asks to itself)."""
    text = text.strip()
    if text.startswith("session:"):
        try:
            session = normalize_session_id(text.removeprefix("session:"))
        except InvalidSessionId as exc:
            raise TargetError(f"--forward-to {text!r}: {exc}") from exc
        own = {sid.strip() for sid in own_sessions}
        if session in own:
            raise TargetError(f"--forward-to {text!r} is this node's own session: it would carry its asks "
                              "to itself")
        return Target("session", session)
    if text.startswith("nats://"):
        try:
            broker_url(text)
        except ValueError as exc:
            raise TargetError(f"--forward-to {text!r}: a nats target is nats://HOST:PORT") from exc
        return Target("nats", text.removeprefix("nats://"))
    raise TargetError(f"--forward-to {text!r}: unknown target (use session:ID or nats://HOST:PORT)")


def _session(target: Target, place: CourierPlace) -> Courier:
    return SessionCourier(place.root, target.address, place.clock)


def _nats(target: Target, place: CourierPlace) -> Courier:
    key = None
    if place.state_dir is not None:
        try:
            # named by its broker user when its access file names its key: the name `pi-authorizer
            # broker` lists it under in the approvers' [couriers]
            access = place.access
            named = access.user if access is not None and access.node_key is not None else None
            key = node_key_of(access, place.state_dir, named or place.node)
        except (SigningRefused, OSError) as exc:
            raise TargetError(f"--forward-to {target}: this node's key cannot be used: {exc}") from exc
    return NatsCourier(str(target), node=place.node, clock=place.clock, access=place.access, node_key=key)


#: scheme → the builder of its transport.
BUILDERS: dict[str, Builder] = {"session": _session, "nats": _nats}


def build_courier(target: Target, place: CourierPlace) -> Courier:
    """The transport for `target` (raises `TargetError` when its scheme cannot be built here)."""
    builder = BUILDERS.get(target.scheme)
    if builder is None:
        raise TargetError(f"--forward-to {target}: no transport for {target.scheme!r}")
    return builder(target, place)
