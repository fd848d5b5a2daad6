"""One parcel's door of the route (`core.serving.door.Door`): read it again, deliver this node's
verdict, acknowledge it once settled.

Delivering is the one write of an approver's verdict: recorded in the history first (durable before it
is visible anywhere, as a file's), then KV `create` through the broker's door
(`core/courier/broker_door.py`), then the row noted: delivered (this node's verdict won) or ended with
who won, in words ("decided elsewhere by N"). A parcel past its child's deadline is never decided.

What the door needs of the approver that took the parcel comes in one value (`Approver`): who this
node is (its name, its key, the trust lists that say whose answer it may name), its clock, its history
and observer, and the consumer loop's hooks (`core/courier/broker_inbox.py`: a step alongside, a key
done with, a verdict that won, a parcel settled).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field

from nats.aio.msg import Msg
from pydantic import ValidationError

from core.clock import Clock
from core.courier.broker import BrokerDecision
from core.courier.broker_access import BrokerAccess
from core.courier.broker_door import BrokerDoor
from core.courier.signing import NodeKey
from core.serving.records import AWAITING, AskRecord, AskRecords
from core.serving.verdicts import Ledger, VerdictRecord, VerdictRow, WrittenMark, gate_denial
from core.vocabulary.asks import Answered, Ask, AskKey, Decision
from core.vocabulary.events import Observer, ServeEvent
from core.wire.reader import RequestRejected
from core.wire.request import ParsedRequest
from core.wire.response import ForwardedResponse, encode_response

log = logging.getLogger("pi_authorizer.broker")

#: Who answers a parcel that names no usable responder (the child's reader checks only its type).
BROKER_RESPONDER = "pi-authorizer-broker"

#: The row a verdict that won is recorded in: its ask, its request id, the parcel's digest.
WonRow = tuple[AskKey, str, str]


@dataclass(frozen=True)
class Approver:
    """What a parcel's door needs of the approver serving it, in one value."""

    node: str
    url: str
    clock: Clock
    #: This node's key: its own verdicts are those under it.
    node_key: NodeKey
    #: Credentials and the trust lists (`[approvers]`, `[couriers]`); None: none.
    access: BrokerAccess | None
    #: The node's history: a verdict recorded before it is written, its row noted after.
    ledger: Ledger | None
    observe: Observer | None
    #: Starts a step alongside, among the consumer loop's tasks (cancelled when it closes).
    spawn: Callable[[Coroutine[object, object, None]], asyncio.Task[None]]
    #: A key this node is done with: a later delivery of its parcel is acknowledged and nothing more.
    remember: Callable[[str], None]
    #: This node's verdict won the key, recorded in this row (a courier's late note may lower it).
    won: Callable[[BrokerDoor, str, WonRow], None]
    #: The parcel leaves the consumer loop (its record released, its message acknowledged): how, why.
    settle: Callable[[ParcelDoor, str, str], None]

    def event(self, event: ServeEvent) -> None:
        if self.observe is None:
            return
        try:
            self.observe(event)
        except Exception:
            log.error("broker %s: the history did not take %s", self.url, event.kind, exc_info=True)

    def checked(self, won: BrokerDecision, key: str, parcel_id: str, digest: str) -> BrokerDecision:
        """`won` as this node may name its writer: a verdict under this node's own key or an
        `[approvers]` key, a withdrawal under a `[couriers]` key; anything else is an unverified
        writer's claim (logged with why), never a named node's decision."""
        access = self.access
        if won.kind == "verdict":
            trusted = {self.node_key.public: self.node} | (access.trusted("approvers") if access else {})
        else:
            trusted = access.trusted("couriers") if access else {}
        why = won.why_not(trusted, key, parcel_id, digest)
        if why is None:
            return won
        log.info("broker %s: the answer on %s names %r, not believed: %s", self.url, parcel_id, won.by, why)
        return won.unverified()

    async def answered(
        self, broker: BrokerDoor, key: str, ask_key: AskKey, read: ParsedRequest | RequestRejected,
        digest: str,
    ) -> BrokerDecision | None:
        """The answer the key holds already (as this node may name its writer), None if none yet. The
        row an earlier run of this node left says so first: its own verdict, recorded before it was
        written, is the one delivered; any other answer ends the row."""
        already = await broker.read(key)
        if already is None:
            return None
        already = self.checked(already, key, ask_key.name, digest)
        if already.kind == "verdict" and already.by == self.node and not already.claimed:
            if isinstance(read, ParsedRequest):
                await self.note_rows([WrittenMark(ask_key, read.request.id, True)])
        else:
            self.event(ServeEvent("withdrawn", ask_key, self.clock.wall(),
                                  reason=already.words_for(self.node)))
        return already

    async def deliver(
        self, broker: BrokerDoor, key: str, name: str, decision: Decision,
        record: tuple[AskKey, ParsedRequest] | None, *, digest: str,
    ) -> BrokerDecision | None:
        """The verdict recorded (durable before it is visible), then written; the winner if not us."""
        verdict = VerdictRecord(record[0], record[1], decision.response, encode_response(decision.response),
                                decision.outcome) if record is not None else None
        if verdict is not None and not await self.record(verdict):
            # Nothing is visible without its record: a fail-safe denial that says why goes instead.
            denial = gate_denial(BROKER_RESPONDER, self.clock, "this node's history could not record "
                                 "its verdict")
            decision = Decision(denial, "fail-safe", reply=decision.reply)
            verdict = None
        body = verdict.body if verdict is not None else encode_response(decision.response)
        return await self.deliver_body(broker, key, name, body, record, recorded=verdict is not None,
                                       digest=digest)

    async def deliver_body(
        self, broker: BrokerDoor, key: str, name: str, body: bytes,
        record: tuple[AskKey, ParsedRequest] | None, *, recorded: bool, digest: str,
    ) -> BrokerDecision | None:
        """The one write of a verdict's bytes: KV `create`, retried while the broker is away. A retry
        that meets this node's own bytes is this node's verdict (the first try's reply was lost). Then,
        when the bytes are `recorded` in the history, the row: noted delivered (this node's verdict
        won) or ended with who won."""
        won = await broker.deliver(key, body, name, name, digest)
        if won is not None:
            won = self.checked(won, key, name, digest)
        self.remember(key)
        if record is not None and recorded:
            if won is None:
                await self.note_rows([WrittenMark(record[0], record[1].request.id, True)])
                # Then a courier's late note may lower it: one written already is read now.
                self.won(broker, key, (record[0], record[1].request.id, digest))
            else:
                self.event(ServeEvent("withdrawn", record[0], self.clock.wall(), parsed=record[1],
                                      reason=won.words_for(self.node)))
        return won

    async def record(self, verdict: VerdictRecord) -> bool:
        """Into the history, durable (a thread worker: SQLite); whether it took it (or keeps none)."""
        if self.ledger is None:
            return True
        ledger = self.ledger
        try:
            await asyncio.to_thread(ledger.record_verdicts, [verdict])
        except Exception:
            log.error("broker %s: the history did not take the verdict on %s", self.url, verdict.key.name,
                      exc_info=True)
            return False
        return True

    async def decided_here(self, key: AskKey, parsed: ParsedRequest) -> bool:
        """This node's history holds a verdict on this ask that it delivered or whose row ended: the ask
        is decided, whatever its key holds now (deleted or purged, and written again or not)."""
        recorded = await self._row(key, parsed)
        return recorded is not None and (recorded.written or recorded.ended)

    async def recorded(self, key: AskKey, parsed: ParsedRequest) -> VerdictRow | None:
        """A verdict an earlier run recorded for this ask and never wrote (killed in between)."""
        recorded = await self._row(key, parsed)
        if recorded is None or recorded.written or recorded.ended:
            return None
        try:
            ForwardedResponse.model_validate_json(recorded.body)
        except ValidationError:
            return None  # not a response this node could have recorded: the parcel is judged anew
        return recorded

    async def _row(self, key: AskKey, parsed: ParsedRequest) -> VerdictRow | None:
        if self.ledger is None:
            return None
        ledger, request_id = self.ledger, parsed.request.id
        try:
            found = await asyncio.to_thread(ledger.recorded_verdicts, key.session_id, [request_id])
        except Exception:
            log.error("broker %s: the history could not be read for %s", self.url, key.name, exc_info=True)
            return None
        return found.get(request_id)

    async def note_rows(self, marks: list[WrittenMark]) -> None:
        if self.ledger is None:
            return
        ledger = self.ledger
        try:
            await asyncio.to_thread(ledger.mark_written, marks)
        except Exception:  # the verdict stands on the broker; the history says what it could
            log.error("broker %s: the history did not note %s", self.url, marks[0].key.name, exc_info=True)


@dataclass(eq=False)
class ParcelDoor:
    """One parcel as the route's door: read again (past its deadline it is never decided), delivered
    (recorded in the history, then KV `create`), acknowledged once settled. Its message is
    acknowledged only then, so nothing is lost."""

    approver: Approver
    broker: BrokerDoor
    #: The parcel's decision key on the broker.
    key: str
    #: The newest delivery of its message: acknowledged once the parcel is settled.
    msg: Msg
    #: When its child gives up (on this node's monotonic clock).
    deadline: float
    #: sha256 of the parcel's request bytes: what this node's signed verdict is for.
    digest: str
    table: AskRecords
    record: AskRecord
    #: Steps of the route started while its message is being taken: its batch waits for them.
    steps: list[asyncio.Task[None]] = field(default_factory=list)
    inline: bool = True

    @property
    def records(self) -> AskRecords:
        return self.table

    @property
    def settled(self) -> bool:
        return not self.record.live

    @property
    def writing(self) -> bool:
        """This node is writing its verdict: the key's write seen meanwhile may be its own."""
        return self.record.state == "decided"

    def go_on(
        self, record: AskRecord, step: Coroutine[object, object, None], finish: bool
    ) -> asyncio.Task[None]:
        task = self.approver.spawn(step)
        if self.inline:
            self.steps.append(task)
        return task

    def answer_soon(self, record: AskRecord, decision: Decision) -> None:
        self.go_on(record, self._deliver(record, decision), True)

    async def _deliver(self, record: AskRecord, decision: Decision) -> None:
        await self.deliver(record, decision)

    async def read(self, record: AskRecord, ask: Ask, decision: Decision) -> Answered | None:
        """None while the parcel waits for this node's verdict; past its child's deadline it is never
        decided (withdrawn, acknowledged)."""
        if self.settled:
            return Answered(False, "this ask was already settled")
        if self.approver.clock.monotonic() < self.deadline:
            return None
        self.table.move(record, "withdrawn")
        self.approver.event(ServeEvent("withdrawn", record.key, self.approver.clock.wall(),
                                       parsed=record.parsed,
                                       reason="the child's deadline passed before this decision"))
        self.approver.settle(self, "expired", "the child's deadline passed")
        return Answered(False, "the child's deadline passed")

    async def deliver(self, record: AskRecord, decision: Decision) -> Answered:
        """Recorded (durable), then created on the key; the record ends published (this node's verdict
        won) or withdrawn (another answer won: who, in words)."""
        if record.state not in AWAITING:
            return Answered(False, "this ask was already settled")
        parsed = record.parsed
        assert parsed is not None
        self.table.move(record, "decided")
        won = await self.approver.deliver(self.broker, self.key, record.key.name, decision,
                                         (record.key, parsed), digest=self.digest)
        if won is None:
            self.table.move(record, "published")
            self.approver.settle(self, decision.outcome, "")
            return Answered(True)
        self.table.move(record, "withdrawn")
        self.approver.settle(self, "elsewhere", won.words)
        return Answered(False, why_not=won.words, elsewhere=won.words)

    def acknowledge(self, record: AskRecord, outcome: str, words: str = "") -> None:
        self.approver.settle(self, outcome, words)
