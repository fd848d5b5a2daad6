"""A parcel is decoded off the event loop (issue 33, finding 7): while a large bracket-heavy parcel
is being decoded and nesting-checked, the loop an approver's screen runs on keeps serving callbacks.
Proved by condition on a real nats-server: the decode is held at its seam (`broker.decode`) until a
callback scheduled on the loop has run, which it could not if the decode held the loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import nats

from core.courier.broker import ask_subject, encode_parcel
from core.courier.broker_inbox import BrokerInbox
from core.serving.judgment import NoRecordedAuthority
from core.testing import ScriptedArbiter
from tests.helpers import NatsServer, broker_parcel, wait_for

#: Held at the seam at most this long (a bound, never a measure: the test fails by condition).
HOLD_S = 30.0


def bracket_heavy(parcel_id: str) -> bytes:
    """A request near the size limit, nearly all brackets: in its strings and nested 100 deep (under
    the limit, so it is read and shown)."""
    nested: Any = "end"
    for _ in range(100):
        nested = [nested, {"k": "x"}]
    return encode_parcel(broker_parcel(parcel_id, value="ls " + "[{" * 200_000,
                                       extra=[[["[" * 1000]] * 50] * 4, deep=nested))


async def test_the_loop_runs_while_a_bracket_heavy_parcel_is_decoded(nats_server: NatsServer) -> None:
    loop = asyncio.get_running_loop()
    loop_thread = threading.current_thread()
    marker_ran = threading.Event()
    held: list[tuple[bool, bool]] = []  # per decode: (on the loop's thread, the loop ran the marker)

    def checkpoint(name: str) -> None:
        if name != "broker.decode":
            return
        on_loop = threading.current_thread() is loop_thread
        if on_loop:  # waiting here would hold the very loop the marker needs
            held.append((True, False))
            return
        marker_ran.clear()
        loop.call_soon_threadsafe(marker_ran.set)  # the marker: runs only if the loop is free
        held.append((False, marker_ran.wait(HOLD_S)))

    person = ScriptedArbiter("person", lambda ask: None)
    inbox = BrokerInbox(nats_server.url, node="node-b", judge=NoRecordedAuthority(), arbiter=person,
                        checkpoint=checkpoint)
    await inbox.start()
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        for n in range(3):
            await js.publish(ask_subject("host-a", "sess-1"), bracket_heavy(f"heavy-{n}"))
        await wait_for(lambda: len(person.held) == 3, what="the three heavy asks before the person")
        assert held and all(entry == (False, True) for entry in held), held
        shown = person.shown[next(iter(person.held))]
        assert shown.request.value is not None and shown.request.value.startswith("ls [{")
    finally:
        await nc.close()
        await inbox.close()
