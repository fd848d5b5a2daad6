"""A parcel's message unpacked, on the consumer's decoding thread (never on the event loop: issue 33,
finding 7, a batch of bracket-heavy parcels froze an approver's screen): decoded with bounds
(`core/courier/broker.py`), its claimed origin checked against the subject the broker took it on, its
request read by the same tolerant reader as a file's (`core/wire/reader.py`). Pure: no broker, no
history; what the consumer does with it is `core/courier/broker_inbox.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.courier.broker import ASK_PREFIX, BrokerRefused, decode_parcel, parcel_id_of, token
from core.courier.transport import Parcel
from core.seams import FaultHook
from core.wire.reader import RequestRejected, parse_request
from core.wire.request import CarriedHop, ParsedRequest


@dataclass(frozen=True)
class Unpacked:
    """A message as the decoding thread read it: its parcel (or why it is refused, and its parcel id if
    one could be read) and the parcel's request (or why it is rejected)."""

    parcel: Parcel | None = None
    parcel_id: str | None = None
    refused: str = "the parcel was not read"
    read: ParsedRequest | RequestRejected = field(default_factory=lambda: RequestRejected("not read"))


def unpack(data: bytes, subject: str, checkpoint: FaultHook) -> Unpacked:
    """Decode, nesting-check and read one message (on the decoding thread: `BrokerInbox._take`)."""
    checkpoint("broker.decode")
    try:
        parcel = decode_parcel(data)
        _check_origin(parcel, subject)
    except BrokerRefused as exc:
        return Unpacked(parcel_id=parcel_id_of(data), refused=exc.reason)
    try:
        read: ParsedRequest | RequestRejected = _with_hops(parse_request(parcel.request), parcel)
    except RequestRejected as exc:
        read = exc
    return Unpacked(parcel, parcel.parcel_id, read=read)


def _with_hops(parsed: ParsedRequest, parcel: Parcel) -> ParsedRequest:
    """The request as read, its hop list the parcel's (the envelope the broker carried, checked
    against the publishing subject), so the queue shows where the ask came through."""
    hops = tuple(CarriedHop(host=h.host, session_id=h.session_id, node=h.node) for h in parcel.hops)
    return parsed._replace(request=parsed.request.model_copy(update={"hops": hops}))


def _check_origin(parcel: Parcel, subject: str) -> None:
    """The parcel's last hop (the courier that published it) must be the subject's host and session:
    a host can publish only under its own name, so it cannot pass an ask off as another's."""
    origin = parcel.hops[-1]
    expected = f"{ASK_PREFIX}.{token(origin.host)}.{token(origin.session_id)}"
    if subject != expected:
        raise BrokerRefused(
            f"the parcel claims to come from {origin.host!r}/{origin.session_id!r} but was published on "
            f"{subject[:200]!r}"
        )
