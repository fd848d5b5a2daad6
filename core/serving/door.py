"""The door an ask comes in by and its verdict goes out of: the one seam between the route
(`core.serving.route`, which owns every ask's record and its order) and where the ask lives.

Two doors implement it: the inbox on disk (`core.serving.pipeline`: request files read by the drain,
answers recorded and linked into place by the publisher, unusable files quarantined) and the broker
(`core.courier.parcel_door`: a parcel taken by `core.courier.broker_inbox`, its verdict recorded and
then created on its one decision key, the message acknowledged or terminated). A door is one value
per place asks come from (an inbox's session, one parcel): the route passes it along each step of
the ask.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Protocol

from core.serving.records import AskRecord, AskRecords
from core.vocabulary.asks import Answered, Ask, Decision


class Door(Protocol):
    """Read, deliver, withdraw, acknowledge: what the route asks of the place an ask came from."""

    @property
    def records(self) -> AskRecords:
        """The lifecycle table the door's asks are recorded in (`core.serving.records`)."""
        ...

    def go_on(
        self, record: AskRecord, step: Coroutine[object, object, None], finish: bool
    ) -> asyncio.Task[None]:
        """The rest of the route waits (the chain, the history, the disk, the broker): it goes on
        alongside, guarded (whatever goes wrong sets the ask aside with the reason). `finish`: it
        answers the ask, so it is let finish at shutdown."""
        ...

    def answer_soon(self, record: AskRecord, decision: Decision) -> None:
        """Deliver a decision no one waits on (a rule's, a link's, the fail-safe's); what became of it
        is reported as for any answer."""
        ...

    async def read(self, record: AskRecord, ask: Ask, decision: Decision) -> Answered | None:
        """Read the ask again before its decision is delivered: None while it still stands as it was
        decided; else what the one who decided learns (withdrawn, replaced, past its deadline)."""
        ...

    async def deliver(self, record: AskRecord, decision: Decision) -> Answered:
        """Record the verdict (durable) and only then make it visible; what became of it."""
        ...

    def acknowledge(self, record: AskRecord, outcome: str, words: str = "") -> None:
        """The route is done with an ask it delivers nothing for (left for another authorizer,
        withdrawn, past its deadline, decided elsewhere): the door lets go of it (the broker
        acknowledges its message, so it is not handed to this node again)."""
        ...
