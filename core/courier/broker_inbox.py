"""The approver's side of the broker: asks couriers put on NATS JetStream, served by the one route.

Each approver node reads every ask through its own durable consumer (`approver-<node>`), so a node
killed and restarted is given again every ask it had not settled (after the consumer's ack wait).
A parcel is untrusted: decoded with bounds (`core/courier/broker.py`), its request read by the same
tolerant reader as a file (`core/wire/reader.py`), its claimed origin checked against the subject
the broker took it on. Then each parcel is a door (`ParcelDoor`, `core/serving/door.py`) of the
route every ask goes down (`core/serving/route.py`: this node's rules, the chain, the arbiter: the
person, `--on-ask`), with a record in the same lifecycle table as a file's (`core/serving/records.py`,
one per origin). The verdict is recorded in the history first (durable before it is visible anywhere,
as a file's), then written with KV `create`: when approvers race, or the courier withdrew the parcel,
one answer exists, and every other node withdraws the ask from its arbiter with "decided elsewhere by
N" (its row ends so). A `create` whose reply was lost and whose retry meets this node's own verdict is
this node's verdict. A parcel past its deadline is never decided; a verdict that won after its
courier had answered its child (a note beside the key says so) is recorded as not delivered. A message is
acknowledged only once its parcel is settled (answered, decided elsewhere, withdrawn, past its
deadline, or refused with why), so nothing is lost and nothing answered twice.

What stays here is the broker's side only: the consumer loop, the parcel decoded and checked, an
earlier run's verdict found on the key or in the history, refusals, resync, late notes and expiry.
The broker itself (read a key, deliver a verdict, acknowledge or terminate a message) is
`core/courier/broker_door.py`.

A parcel is decoded, nesting-checked and its request read on one worker thread of the inbox, never
on the event loop (issue 33, finding 7: a batch of bracket-heavy parcels froze an approver's screen);
a batch waits for what the route does without a person (the chain, a rule's answer), so the work
queued is bounded by the batch.

Size: the consumer loop, an earlier run's answer found on the key or in the history, the parcel's
door of the route (`ParcelDoor`) and its delivery (recorded, then created, then the row noted), and
the parcel's decoding: what only a parcel has; judging, the chain and the arbiter are the route's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from nacl.signing import SigningKey
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.courier.broker import (
    ASK_PREFIX,
    ASK_STREAM,
    BROKER_DOWN,
    DECISION_SUBJECT_PREFIX,
    NOT_DELIVERED,
    NOT_RELAYED,
    BrokerDecision,
    BrokerLink,
    BrokerRefused,
    broker_url,
    connect,
    decision_key,
    decode_parcel,
    host_token_of,
    late_key,
    parcel_id_of,
    token,
)
from core.courier.broker_access import BrokerAccess
from core.courier.broker_door import BrokerDoor, acknowledge, terminate
from core.courier.broker_health import BrokerHealth
from core.courier.broker_history import late_row_of, read_late_notes
from core.courier.signing import NodeKey, parcel_digest
from core.courier.transport import Parcel
from core.seams import FaultHook, no_fault
from core.serving.judgment import Chain, Judge
from core.serving.records import AWAITING, AskRecord, AskRecords
from core.serving.route import Route
from core.serving.verdicts import Ledger, VerdictRecord, VerdictRow, WrittenMark, gate_denial
from core.vocabulary.asks import Answered, Arbiter, Ask, AskKey, Decision
from core.vocabulary.events import Observer, ServeEvent
from core.wire.reader import RequestRejected, parse_request
from core.wire.request import CarriedHop, ParsedRequest
from core.wire.response import ForwardedResponse, encode_response

log = logging.getLogger("pi_authorizer.broker")

#: How often a node whose broker is out of reach at start tries again.
UNREACHABLE_RETRY_S = 5.0
#: How often the keys of the asks before the arbiter are read anyway (a write whose notice was lost
#: while the broker restarted), as serving rescans its inboxes.
SAFETY_RESYNC_S = 5.0
#: How many settled parcels a node remembers, to acknowledge a second delivery without a word.
REMEMBERED = 100_000
#: How a parcel this node's history holds as decided is settled when it comes again (issue 33).
DECIDED_HERE = "already decided by this node (its history holds the verdict): never shown again"
#: Who answers a parcel that names no usable responder (the child's reader checks only its type).
BROKER_RESPONDER = "pi-authorizer-broker"


@dataclass(frozen=True)
class Settled:
    """What became of one parcel on this node (for the log, the tests and the benchmark)."""

    parcel_id: str
    #: `rule`, `chain`, `user`, `fail-safe`... (this node's verdict won), `elsewhere`, `refused`,
    #: `expired`, `left`.
    outcome: str
    words: str = ""


@dataclass
class BrokerInboxStats:
    settled: list[Settled] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)


class BrokerInbox:
    """Serves the broker's asks to one node's rules, chain and arbiter until `close`."""

    def __init__(
        self,
        url: str,
        *,
        node: str,
        judge: Judge,
        arbiter: Arbiter,
        chain: Chain | None = None,
        clock: Clock = SYSTEM_CLOCK,
        ack_wait_s: float = 30.0,
        batch: int = 64,
        request_timeout_s: float = 2.0,
        retry_s: float = 0.2,
        on_settled: Callable[[Settled], None] | None = None,
        ledger: Ledger | None = None,
        observe: Observer | None = None,
        access: BrokerAccess | None = None,
        checkpoint: FaultHook = no_fault,
        node_key: NodeKey | None = None,
    ) -> None:
        self.url = broker_url(url)
        self.node = node
        #: This node's key (`<state>/node.nk`): its verdicts are signed with it, and a verdict is this
        #: node's own only under it. None: a key for this run only (a test's node).
        self.node_key = node_key if node_key is not None else NodeKey(node, SigningKey.generate())
        #: Credentials and TLS (`--broker-access`).
        self.access = access
        self.arbiter = arbiter
        self.clock = clock
        #: The one route of every ask (`core/serving/route.py`): this node's rules, the chain, the
        #: arbiter; each parcel is its door (`ParcelDoor`).
        self.route = Route(arbiter, judge, chain, clock, self._event)
        self.ack_wait_s = ack_wait_s
        self.batch = batch
        self.request_timeout_s = request_timeout_s
        self.retry_s = retry_s
        self.on_settled = on_settled
        #: The node's history, as serving's: an ask's arrival observed, this node's winning verdict
        #: recorded (once it won the key), a lost race or an expiry observed as withdrawn with why.
        self.ledger = ledger
        self.observe = observe
        self.stats = BrokerInboxStats()
        #: The parcels this node is serving (from arrival until settled), by decision key.
        self._held: dict[str, ParcelDoor] = {}
        #: Their records, one lifecycle table per origin (`nats:<host>/<session>`), as an inbox's.
        self._tables: dict[str, AskRecords] = {}
        #: Keys of parcels being read, not yet shown nor settled, with their message's stream sequence.
        self._working: dict[str, int] = {}
        #: Keys of the parcels this node settled, newest last (bounded: an older one is read again).
        self._settled_keys: OrderedDict[str, None] = OrderedDict()
        #: Keys this node's verdict won, with the row it is recorded in (for a courier's late note).
        self._won: OrderedDict[str, tuple[AskKey, str, str]] = OrderedDict()
        self._link: BrokerLink | None = None
        self._closing = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        #: Called with `broker.decode` on the decoding thread before each parcel is read (a seam).
        self.checkpoint = checkpoint
        self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"broker-decode-{token(node)}")

    @property
    def durable(self) -> str:
        return f"approver-{token(self.node)}"

    async def start(self) -> None:
        """Connect (raises what nats-py raises when the broker is out of reach) and start serving."""
        self._link = await connect(self.url, timeout_s=self.request_timeout_s, name=self.node,
                                   access=self.access)
        log.info("broker %s: node %s signs with %s (its line in a courier's [approvers]: %s = \"%s\")",
                 self.url, self.node, self.node_key.public, self.node, self.node_key.public)
        self._runner = asyncio.create_task(self._run(self._link), name=f"broker inbox {self.node}")
        self._spawn(self._late_while_down(self._door_of(self._link)))  # issue 33: notes missed while down

    async def close(self) -> None:
        """Stop taking asks; asks before the arbiter stay unacknowledged, so a later run gets them."""
        self._closing.set()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        for task in list(self._tasks):
            task.cancel()
        for held in list(self._held.values()):
            self.arbiter.withdraw(held.record.key, "this authorizer stopped serving the broker")
        self._held.clear()
        self._tables.clear()
        if self._link is not None:
            with contextlib.suppress(*BROKER_DOWN):
                await self._link.close()
        self._decoder.shutdown(wait=False, cancel_futures=True)

    # -- the loop -----------------------------------------------------------------------------------

    async def _run(self, link: BrokerLink) -> None:
        decisions: Subscription | None = None
        pull = None
        reconnects = link.nc.stats["reconnects"]
        resync_at = self.clock.monotonic() + SAFETY_RESYNC_S
        while not self._closing.is_set():
            try:
                if decisions is None:
                    decisions = await link.nc.subscribe(f"{DECISION_SUBJECT_PREFIX}.>", cb=self._on_decision)
                if pull is None:
                    pull = await link.js.pull_subscribe(
                        f"{ASK_PREFIX}.>",
                        durable=self.durable,
                        stream=ASK_STREAM,
                        config=ConsumerConfig(
                            ack_wait=self.ack_wait_s,
                            max_ack_pending=-1,
                            deliver_policy=DeliverPolicy.ALL,
                        ),
                    )
                due = self.clock.monotonic() >= resync_at
                if link.nc.stats["reconnects"] != reconnects or due:
                    now_at = link.nc.stats["reconnects"]
                    # counted done only once it worked (JetStream may lag)
                    await self._resync(self._door_of(link))
                    reconnects, resync_at = now_at, self.clock.monotonic() + SAFETY_RESYNC_S
                self._expire()
                try:
                    msgs = await pull.fetch(self.batch, timeout=1.0)
                except TimeoutError:
                    continue
                # a batch's parcels are served side by side (each waits on the broker several times);
                # a broker failure in any is retried as one, the others' messages come back unacked
                door = self._door_of(link)
                outcomes = await asyncio.gather(*(self._take(door, msg) for msg in msgs),
                                                return_exceptions=True)
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        raise outcome
            except asyncio.CancelledError:
                raise
            except BROKER_DOWN as exc:
                log.info("broker %s: %s; retrying", self.url, exc)
                await self.clock.wait(self._closing, self.retry_s)
            except Exception:  # whatever nats-py raises next, the node keeps serving its broker
                log.error("broker %s: serving failed; retrying", self.url, exc_info=True)
                await self.clock.wait(self._closing, self.retry_s)

    async def _resync(self, door: BrokerDoor) -> None:
        """After a reconnect: decisions written while this node was away are read from the bucket."""
        held = list(self._held.values())
        for start in range(0, len(held), self.batch):  # side by side, a batch at a time
            chunk = held[start : start + self.batch]
            found = await asyncio.gather(*(door.read(h.key) for h in chunk))
            for one, won in zip(chunk, found, strict=True):
                if won is not None:
                    self._elsewhere(one, won)

    def _expire(self) -> None:
        now = self.clock.monotonic()
        for held in list(self._held.values()):
            if now >= held.deadline and not held.settled and not held.writing:  # a write reports itself
                self._withdraw(held, "expired", "the child's deadline passed")

    def _on_decision_key(self, subject: str) -> str:
        return subject[len(DECISION_SUBJECT_PREFIX) + 1 :]

    async def _on_decision(self, msg: Msg) -> None:
        """A write was attempted on a decision key. Core NATS shows every publish on the subject, the
        ones JetStream refused too (a losing `create`), so what won is read from the bucket, never
        from the message."""
        key = self._on_decision_key(msg.subject)
        if key.endswith(".late") and key[: -len(".late")] in self._won and self._link is not None:
            self._spawn(self._late(self._door_of(self._link), key[: -len(".late")]))
            return
        held = self._held.get(key)
        if held is None or held.settled or held.writing or self._link is None:
            return
        self._spawn(self._recheck(self._door_of(self._link), held))

    async def _late(self, door: BrokerDoor, key: str) -> None:
        """A courier notes that it had answered its child before this node's verdict won (its claim:
        it can only lower what this node's row says). The row says the verdict was not delivered."""
        note = await door.read(late_key(key))
        if note is None or note.kind != "withdrawn":
            return
        row = self._won.pop(key, None)
        if row is None:
            return
        # believed only under a [couriers] key; without a list, recorded as the courier's claim
        checked = self._checked(note, late_key(key), row[0].name, row[2])
        if checked.claimed and self.access is not None and self.access.couriers:
            log.warning("broker %s: a late note on %s naming %r is not believed: the row stays delivered",
                        self.url, row[0].name, note.by)
            return
        says = f"the courier at {note.by} says, unverified" if checked.claimed else \
            f"the courier at {note.by} says, verified"
        what = NOT_RELAYED if note.body.startswith(NOT_RELAYED) else NOT_DELIVERED
        log.warning("broker %s: this node's verdict on %s was %s (%s)", self.url, row[0].name, what, says)
        await self._note_rows([WrittenMark(row[0], row[1], False, why=f"{what} ({says})")])

    async def _late_while_down(self, door: BrokerDoor) -> None:
        """Late notes written while this node was down: for each key whose first value is this node's
        own signed verdict, the row the note names is read as `_late` reads one (the note's row is its
        writer's claim: believed only when the row's recorded verdict is exactly that verdict)."""
        if self.ledger is None:
            return
        ledger, mine = self.ledger, {self.node_key.public: self.node}
        for key, note in await read_late_notes(door.link, self.request_timeout_s):
            row = late_row_of(note.body, key)
            first = await door.read(key) if row is not None else None
            if row is None or first is None or first.kind != "verdict" or \
                    first.why_not(mine, key, first.parcel_id, first.parcel_digest) is not None:
                continue
            label, request_id = row
            found = (await asyncio.to_thread(ledger.recorded_verdicts, label, [request_id])).get(request_id)
            if found is not None and found.written and found.body == first.body.encode("utf-8"):
                self._won[key] = (AskKey(label, first.parcel_id), request_id, first.parcel_digest)
                await self._late(door, key)

    async def _recheck(self, door: BrokerDoor, held: ParcelDoor) -> None:
        """Read the key until the bucket answers (right after a broker restart JetStream may not yet)."""
        while not (held.settled or held.writing or self._closing.is_set()):
            try:
                won = await door.read(held.key)
            except BROKER_DOWN:
                await self.clock.wait(self._closing, self.retry_s)
                continue
            if won is not None and not held.settled and not held.writing:
                self._elsewhere(held, won)
            return

    def _elsewhere(self, held: ParcelDoor, won: BrokerDecision) -> None:
        if held.settled or held.writing:  # settled meanwhile, or this node's own write in flight
            return
        won = self._checked(won, held.key, held.record.key.name, held.digest)
        self._withdraw(held, "elsewhere", won.words_for(self.node))

    def _withdraw(self, held: ParcelDoor, outcome: str, words: str) -> None:
        """The ask leaves without this node's verdict (decided elsewhere, past its deadline): its
        record ends withdrawn, the route lets its arbiter go and says why, the message is acknowledged."""
        held.table.move(held.record, "withdrawn")
        self.route.withdrawn(held.record, held.record.parsed, words)
        self._drop(held, Settled(held.record.key.name, outcome, words))

    def _drop(self, held: ParcelDoor, settled: Settled) -> None:
        held.table.release(held.record)
        if not held.table:
            self._tables.pop(held.table.session_id, None)
        self._held.pop(held.key, None)
        self._remember(held.key)
        self._ack(held.msg)
        self._note(settled)

    def _remember(self, key: str) -> None:
        """This node is done with the parcel: a later delivery of it is acknowledged and nothing more."""
        self._settled_keys[key] = None
        self._settled_keys.move_to_end(key)
        while len(self._settled_keys) > REMEMBERED:
            self._settled_keys.popitem(last=False)

    def _note(self, settled: Settled) -> None:
        self.stats.settled.append(settled)
        if self.on_settled is not None:
            self.on_settled(settled)

    def _door_of(self, link: BrokerLink) -> BrokerDoor:
        return BrokerDoor(link, self.node, self.clock, self._closing, self.retry_s, self.url, self.node_key)

    def _checked(self, won: BrokerDecision, key: str, parcel_id: str, digest: str) -> BrokerDecision:
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

    def _ack(self, msg: Msg) -> None:
        self._spawn(acknowledge(msg))

    def _spawn(self, work: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        """A side task ended: a failure is logged (a verdict not written while closing stays
        unacknowledged, so the broker hands it to the next run), never left unretrieved."""
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("broker %s: %s", self.url, task.exception())

    # -- one parcel ---------------------------------------------------------------------------------

    async def _take(self, door: BrokerDoor, msg: Msg) -> None:
        """One delivery: settled, before the arbiter, or left unacknowledged when the broker failed."""
        unpacked = _Unpacked()
        try:
            unpacked = await asyncio.get_running_loop().run_in_executor(
                self._decoder, _unpack, msg.data, msg.subject, self.checkpoint)
            await self._serve(door, msg, unpacked)
        except BROKER_DOWN:
            raise
        except Exception as exc:  # a parcel never stops serving
            log.error("broker parcel on %s failed", msg.subject[:200], exc_info=True)
            self._quarantine(msg, f"serving it failed: {type(exc).__name__}: {exc}", unpacked.parcel_id)

    def _quarantine(self, msg: Msg, reason: str, parcel_id: str | None = None, raw: bytes | None = None,
                    term: bool = True) -> None:
        """A parcel refused: recorded with the reason, as a quarantined file is (a row of its own), and
        its message terminated (never delivered again) unless it was answered with why."""
        self.stats.quarantined.append(reason)
        log.warning("broker parcel on %s refused: %s", msg.subject[:200], reason)
        name = parcel_id if parcel_id is not None else "(no parcel id)"
        key = AskKey(f"nats:{msg.subject[:200]}", name)
        self._event(ServeEvent("quarantined", key, self.clock.wall(), raw=raw, reason=reason))
        if term:
            self._spawn(terminate(msg))

    async def _serve(self, door: BrokerDoor, msg: Msg, unpacked: _Unpacked) -> None:
        try:
            host_tok = host_token_of(msg.subject)
        except BrokerRefused as exc:
            self._quarantine(msg, exc.reason, unpacked.parcel_id)
            return
        parcel, parcel_id = unpacked.parcel, unpacked.parcel_id
        if parcel is None:
            if parcel_id is not None:
                await self._refuse(door, decision_key(host_tok, parcel_id), parcel_id, unpacked.refused,
                                   parcel_digest(msg.data))
            self._quarantine(msg, unpacked.refused, parcel_id)
            return
        key = decision_key(host_tok, parcel.parcel_id)
        if key in self._settled_keys:  # delivered again (an ack lost, a fetch that timed out): done
            await msg.ack()
            return
        held = self._held.get(key)
        if held is not None:  # delivered again while its arbiter decides
            if msg.metadata.sequence.stream == held.msg.metadata.sequence.stream:
                held.msg = msg  # the same message: the newest delivery is acknowledged when settled
            else:
                await msg.ack()  # another copy of the parcel: the one shown stands for it
            return
        seq = msg.metadata.sequence.stream
        working = self._working.get(key)
        if working is not None:  # another copy being read in this batch: that one stands for it
            if working != seq:
                await msg.ack()
            return
        self._working[key] = seq
        try:
            await self._serve_parcel(door, msg, parcel, key, unpacked.read)
        finally:
            self._working.pop(key, None)

    async def _serve_parcel(self, door: BrokerDoor, msg: Msg, parcel: Parcel, key: str,
                            read: ParsedRequest | RequestRejected) -> None:
        digest = parcel_digest(parcel.request)
        already = await door.read(key)
        if already is not None:
            already = self._checked(already, key, parcel.parcel_id, digest)
        origin = parcel.hops[-1]
        label = f"nats:{origin.host}/{origin.session_id}"
        ask_key = AskKey(session_id=label, name=parcel.parcel_id)
        if already is not None:
            await msg.ack()
            self._remember(key)
            self._note(Settled(parcel.parcel_id, "elsewhere", already.words_for(self.node)))
            if already.kind == "verdict" and already.by == self.node and not already.claimed:
                # An earlier run's verdict, recorded before it was written: it is the one delivered.
                if isinstance(read, ParsedRequest):
                    await self._note_rows([WrittenMark(ask_key, read.request.id, True)])
            else:  # a row an earlier run of this node left open ends here
                self._event(ServeEvent("withdrawn", ask_key, self.clock.wall(),
                                       reason=already.words_for(self.node)))
            return
        left_s = (parcel.deadline_ms - wall_ms(self.clock)) / 1000
        if left_s <= 0:
            if self.health is not None:  # long past: this clock may be wrong (said once, to the person)
                self.health.saw_late_parcel(-left_s)
            await msg.ack()
            self._remember(key)
            self._note(Settled(parcel.parcel_id, "expired", "the child's deadline had passed"))
            return
        if isinstance(read, RequestRejected):
            await self._refuse(door, key, parcel.parcel_id, read.reason, digest)
            self._quarantine(msg, read.reason, parcel.parcel_id, parcel.request, term=False)
            await msg.ack()
            return
        parsed = read
        responder = parsed.request.target_session_id or BROKER_RESPONDER
        if await self._decided_here(ask_key, parsed):  # issue 33: a purged key never reopens it here
            await msg.ack()
            self._remember(key)
            self._note(Settled(parcel.parcel_id, "elsewhere", DECIDED_HERE))
            return
        recorded = await self._recorded(ask_key, parsed)
        if recorded is not None:  # recorded by an earlier run, never written: written as recorded
            await self._publish(door, key, recorded.body, recorded.outcome or "recorded",
                                (ask_key, parsed), recorded=True, digest=digest)
            await msg.ack()
            return
        if ask_key.name in self._tables.get(label, ()):  # a copy under way (a lost record): a later delivery
            return
        table = self._tables.setdefault(label, AskRecords(label))
        record = table.take(ask_key.name)
        held = ParcelDoor(self, door, key, msg, self.clock.monotonic() + left_s, digest, table, record)
        self._held[key] = held
        timeout_ms = max(0, int(parcel.deadline_ms - parsed.request.created_at))
        try:
            self.route.arrive(held, record, parsed, parcel.request, responder, timeout_ms)
            # what the route does without waiting on a person (the chain, a rule's answer) is this batch's
            while held.steps:
                await held.steps.pop(0)
        except BaseException:
            # not settled: the message comes back (the broker failed) or is refused with why (`_take`)
            table.release(record)
            if not table:
                self._tables.pop(label, None)
            self._held.pop(key, None)
            raise
        finally:
            held.inline = False
        # a decision that landed between the read above and the hold was missed by `_on_decision`
        if not held.settled and not held.writing:
            won = await door.read(key)
            if won is not None:
                self._elsewhere(held, won)

    async def _refuse(self, door: BrokerDoor, key: str, parcel_id: str, reason: str, digest: str) -> None:
        """A denial that says why, signed for the bytes this node read (the raw message's, when it could
        not be decoded as a parcel)."""
        denial = gate_denial(BROKER_RESPONDER, self.clock, f"the parcel is unusable: {reason}")
        await self._answer(door, key, parcel_id, Decision(denial, "refused"), digest=digest)

    async def _answer(
        self, door: BrokerDoor, key: str, parcel_id: str, decision: Decision, quiet: bool = False,
        record: tuple[AskKey, ParsedRequest] | None = None, *, digest: str,
    ) -> BrokerDecision | None:
        """The verdict recorded (durable before it is visible), then written; the winner if not us."""
        verdict = VerdictRecord(record[0], record[1], decision.response, encode_response(decision.response),
                                decision.outcome) if record is not None else None
        if verdict is not None and not await self._record(verdict):
            # Nothing is visible without its record: a fail-safe denial that says why goes instead.
            denial = gate_denial(BROKER_RESPONDER, self.clock, "this node's history could not record "
                                 "its verdict")
            decision = Decision(denial, "fail-safe", reply=decision.reply)
            verdict = None
        body = verdict.body if verdict is not None else encode_response(decision.response)
        return await self._publish(door, key, body, decision.outcome, record, recorded=verdict is not None,
                                   quiet=quiet, parcel_id=parcel_id, digest=digest)

    async def _publish(
        self, door: BrokerDoor, key: str, body: bytes, outcome: str,
        record: tuple[AskKey, ParsedRequest] | None, *, recorded: bool, quiet: bool = False,
        parcel_id: str | None = None, digest: str,
    ) -> BrokerDecision | None:
        """The one write of a verdict: KV `create`, retried while the broker is away. A retry that meets
        this node's own bytes is this node's verdict (the first try's reply was lost). Then the row:
        noted delivered (this node's verdict won) or ended with who won."""
        name = parcel_id if parcel_id is not None else (record[0].name if record is not None else key)
        won = await door.deliver(key, body, name, name, digest)
        if won is not None:
            won = self._checked(won, key, name, digest)
        self._remember(key)
        if record is not None and recorded:
            if won is None:
                await self._note_rows([WrittenMark(record[0], record[1].request.id, True)])
                # Then a courier's late note may lower it: one written already is read now.
                self._won[key] = (record[0], record[1].request.id, digest)
                while len(self._won) > REMEMBERED:
                    self._won.popitem(last=False)
                self._spawn(self._late(door, key))
            else:
                self._event(ServeEvent("withdrawn", record[0], self.clock.wall(), parsed=record[1],
                                       reason=won.words_for(self.node)))
        if not quiet:
            self._note(Settled(name, outcome) if won is None else
                       Settled(name, "elsewhere", won.words))
        return won

    async def _record(self, verdict: VerdictRecord) -> bool:
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

    async def _decided_here(self, key: AskKey, parsed: ParsedRequest) -> bool:
        """This node's history holds a verdict on this ask that it delivered or whose row ended: the ask
        is decided, whatever its key holds now (deleted or purged, and written again or not)."""
        if self.ledger is None:
            return False
        ledger, request_id = self.ledger, parsed.request.id
        try:
            found = await asyncio.to_thread(ledger.recorded_verdicts, key.session_id, [request_id])
        except Exception:
            log.error("broker %s: the history could not be read for %s", self.url, key.name, exc_info=True)
            return False
        recorded = found.get(request_id)
        return recorded is not None and (recorded.written or recorded.ended)

    async def _recorded(self, key: AskKey, parsed: ParsedRequest) -> VerdictRow | None:
        """A verdict an earlier run recorded for this ask and never wrote (killed in between)."""
        if self.ledger is None:
            return None
        ledger, request_id = self.ledger, parsed.request.id
        try:
            found = await asyncio.to_thread(ledger.recorded_verdicts, key.session_id, [request_id])
        except Exception:
            log.error("broker %s: the history could not be read for %s", self.url, key.name, exc_info=True)
            return None
        recorded = found.get(request_id)
        if recorded is None or recorded.written or recorded.ended:
            return None
        try:
            ForwardedResponse.model_validate_json(recorded.body)
        except ValidationError:
            return None  # not a response this node could have recorded: the parcel is judged anew
        return recorded

    async def _note_rows(self, marks: list[WrittenMark]) -> None:
        if self.ledger is None:
            return
        ledger = self.ledger
        try:
            await asyncio.to_thread(ledger.mark_written, marks)
        except Exception:  # the verdict stands on the broker; the history says what it could
            log.error("broker %s: the history did not note %s", self.url, marks[0].key.name, exc_info=True)

    def _event(self, event: ServeEvent) -> None:
        if self.observe is None:
            return
        try:
            self.observe(event)
        except Exception:
            log.error("broker %s: the history did not take %s", self.url, event.kind, exc_info=True)

    @property
    def holding(self) -> int:
        """Asks before this node's arbiter."""
        return sum(1 for held in self._held.values() if held.record.state == "shown")

    #: The broker's state for the person (`core/courier/broker_health.py`), when the wiring sets one.
    health: BrokerHealth | None = None

    async def run_until(self, stop: asyncio.Event) -> None:
        """Beside serving (`ServingCore.add_background`, `--broker`): connect, and while the broker is
        out of reach say so once and keep trying every `UNREACHABLE_RETRY_S` (the node's inboxes are
        served meanwhile); closed when serving stops."""
        said = False
        while not stop.is_set():
            try:
                await self.start()
                if self.health is not None:
                    self.health.saw_connected()
                break
            except BROKER_DOWN as exc:
                if self.health is not None:
                    self.health.saw_failure(exc, self.access.user if self.access is not None else None)
                if not said:
                    log.error("broker %s unreachable (%s): its asks are not served until it answers; "
                              "trying every %.0f s", self.url, exc, UNREACHABLE_RETRY_S)
                    said = True
                await self.clock.wait(stop, UNREACHABLE_RETRY_S)
        else:
            return
        log.info("serving the asks of broker %s as %s", self.url, self.durable)
        await stop.wait()
        await self.close()


@dataclass(eq=False)
class ParcelDoor:
    """One parcel as the route's door (`core.serving.door.Door`): read again (past its deadline it is
    never decided), delivered through the broker's door (recorded in the history, then KV `create`),
    acknowledged once settled. Its message is acknowledged only then, so nothing is lost."""

    inbox: BrokerInbox
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
        task = self.inbox._spawn(step)
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
        if self.inbox.clock.monotonic() < self.deadline:
            return None
        self.table.move(record, "withdrawn")
        self.inbox._event(ServeEvent("withdrawn", record.key, self.inbox.clock.wall(), parsed=record.parsed,
                                     reason="the child's deadline passed before this decision"))
        self.inbox._drop(self, Settled(record.key.name, "expired", "the child's deadline passed"))
        return Answered(False, "the child's deadline passed")

    async def deliver(self, record: AskRecord, decision: Decision) -> Answered:
        """Recorded (durable), then created on the key; the record ends published (this node's verdict
        won) or withdrawn (another answer won: who, in words)."""
        if record.state not in AWAITING:
            return Answered(False, "this ask was already settled")
        parsed = record.parsed
        assert parsed is not None
        self.table.move(record, "decided")
        won = await self.inbox._answer(self.broker, self.key, record.key.name, decision, quiet=True,
                                       record=(record.key, parsed), digest=self.digest)
        if won is None:
            self.table.move(record, "published")
            self.inbox._drop(self, Settled(record.key.name, decision.outcome))
            return Answered(True)
        self.table.move(record, "withdrawn")
        self.inbox._drop(self, Settled(record.key.name, "elsewhere", won.words))
        return Answered(False, why_not=won.words, elsewhere=won.words)

    def acknowledge(self, record: AskRecord, outcome: str, words: str = "") -> None:
        self.inbox._drop(self, Settled(record.key.name, outcome, words))


@dataclass(frozen=True)
class _Unpacked:
    """A message as the decoding thread read it: its parcel (or why it is refused, and its parcel id if
    one could be read) and the parcel's request (or why it is rejected)."""

    parcel: Parcel | None = None
    parcel_id: str | None = None
    refused: str = "the parcel was not read"
    read: ParsedRequest | RequestRejected = field(default_factory=lambda: RequestRejected("not read"))


def _unpack(data: bytes, subject: str, checkpoint: FaultHook) -> _Unpacked:
    """Decode, nesting-check and read one message (on the decoding thread: `BrokerInbox._take`)."""
    checkpoint("broker.decode")
    try:
        parcel = decode_parcel(data)
        _check_origin(parcel, subject)
    except BrokerRefused as exc:
        return _Unpacked(parcel_id=parcel_id_of(data), refused=exc.reason)
    try:
        read: ParsedRequest | RequestRejected = _with_hops(parse_request(parcel.request), parcel)
    except RequestRejected as exc:
        read = exc
    return _Unpacked(parcel, parcel.parcel_id, read=read)


def _with_hops(parsed: ParsedRequest, parcel: Parcel) -> ParsedRequest:
    """The request as read, its hop list the parcel's (the envelope the broker carried, checked
    against the publishing subject), so the queue shows where the ask came through."""
    hops = tuple(CarriedHop(host=h.host, session_id=h.session_id, node=h.node) for h in parcel.hops)
    return replace(parsed, request=parsed.request.model_copy(update={"hops": hops}))


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
