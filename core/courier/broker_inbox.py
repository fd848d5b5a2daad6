"""The approver's side of the broker: the consumer loop that takes couriers' asks off NATS JetStream
and sends each down the one route (`core/serving/route.py`: this node's rules, the chain, the
arbiter: the person, `--on-ask`), each parcel its own door (`core/courier/parcel_door.py`).

Each approver node reads every ask through its own durable consumer (`approver-<node>`), so a node
killed and restarted is given again every ask it had not settled (after the consumer's ack wait). A
parcel is untrusted: unpacked on one worker thread, never on the event loop
(`core/courier/parcel_unpack.py`), and refused with why (recorded `quarantined`, its message
terminated or answered with a gate denial). Its record is in the same lifecycle table as a file's
(`core/serving/records.py`, one per origin). What stays here is the consumer's: batches fetched (a
batch waits for what the route does without a person, so the work queued is bounded by it), an
earlier run's verdict found on the key or in the history, the resync after a reconnect, a decision
key's notices ("decided elsewhere by N": the ask withdrawn from the arbiter), expiry (a parcel past
its deadline is never decided), and the courier's late notes (a verdict that won after its courier
had answered its child is recorded as not delivered). A message is acknowledged only once its parcel
is settled (answered, decided elsewhere, withdrawn, past its deadline, or refused with why), so
nothing is lost and nothing answered twice.

Size: one consumer's loop and the notices it acts on (decision keys, late notes, resyncs) share its
state (held asks, won keys, settled keys); split, each part would reach into the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from nacl.signing import SigningKey
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import ConsumerConfig, DeliverPolicy

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
    host_token_of,
    late_key,
    token,
)
from core.courier.broker_access import BrokerAccess
from core.courier.broker_door import BrokerDoor, acknowledge, terminate
from core.courier.broker_health import BrokerHealth
from core.courier.broker_history import late_row_of, read_late_notes
from core.courier.parcel_door import BROKER_RESPONDER, Approver, ParcelDoor, WonRow
from core.courier.parcel_unpack import Unpacked, unpack
from core.courier.signing import NodeKey, parcel_digest
from core.courier.transport import Parcel
from core.seams import FaultHook, no_fault
from core.serving.judgment import Chain, Judge
from core.serving.records import AskRecords
from core.serving.route import Route
from core.serving.verdicts import Ledger, WrittenMark, gate_denial
from core.vocabulary.asks import Arbiter, AskKey, Decision
from core.vocabulary.events import Observer, ServeEvent
from core.wire.reader import RequestRejected
from core.wire.request import ParsedRequest

log = logging.getLogger("pi_authorizer.broker")

#: How often a node whose broker is out of reach at start tries again.
UNREACHABLE_RETRY_S = 5.0
#: How often the keys of the asks before the arbiter are read anyway (a write whose notice was lost
#: while the broker restarted), as serving rescans its inboxes.
SAFETY_RESYNC_S = 5.0
#: How often the late notes are tried after a reconnect before the next reconnect is left to.
LATE_TRIES = 20
#: A late note whose publish was heard is read again this many times, the waits doubling from
#: `LATE_WAIT_S` (~3 s in all), while it is not in the bucket yet: core NATS can show the publish
#: before JetStream stored it, and a notice read too early was never heard again (its row stayed
#: "delivered" while the child read the courier's denial).
LATE_READS = 6
LATE_WAIT_S = 0.05
#: How many settled parcels a node remembers, to acknowledge a second delivery without a word.
REMEMBERED = 100_000
#: How a parcel this node's history holds as decided is settled when it comes again (issue 33).
DECIDED_HERE = "already decided by this node (its history holds the verdict): never shown again"


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
        self.ack_wait_s = ack_wait_s
        self.batch = batch
        self.request_timeout_s = request_timeout_s
        self.retry_s = retry_s
        self.on_settled = on_settled
        #: The node's history, as serving's: an ask's arrival observed, this node's winning verdict
        #: recorded (once it won the key), a lost race or an expiry observed as withdrawn with why.
        self.ledger = ledger
        #: What each parcel's door needs of this node (`core/courier/parcel_door.py`), in one value.
        self.approver = Approver(node, self.url, clock, self.node_key, access, ledger, observe,
                                 self._spawn, self._remember, self._won_here, self._drop)
        #: The one route of every ask (`core/serving/route.py`): this node's rules, the chain, the
        #: arbiter; each parcel is its door (`ParcelDoor`).
        self.route = Route(arbiter, judge, chain, clock, self.approver.event)
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
        self._won: OrderedDict[str, WonRow] = OrderedDict()
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
                    await self._resync(self._door_of(link), reconnected=now_at != reconnects)
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

    async def _resync(self, door: BrokerDoor, reconnected: bool = False) -> None:
        """After a reconnect: decisions written while this node was away are read from the bucket, and
        the late notes couriers wrote meanwhile (their live notices were lost with the connection)."""
        if reconnected:  # beside serving, as at start: a failure there is logged, never stops the asks
            self._spawn(self._late_after_reconnect(door))
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
            self._spawn(self._late(self._door_of(self._link), key[: -len(".late")], heard=True))
            return
        held = self._held.get(key)
        if held is None or held.settled or held.writing or self._link is None:
            return
        self._spawn(self._recheck(self._door_of(self._link), held))

    async def _late(self, door: BrokerDoor, key: str, heard: bool = False) -> None:
        """A courier notes that it had answered its child before this node's verdict won (its claim:
        it can only lower what this node's row says). The row says the verdict was not delivered.
        `heard`: its publish was seen (a read may come before JetStream stored it: `LATE_READS`)."""
        note = await door.read(late_key(key))
        wait = LATE_WAIT_S
        for _ in range(LATE_READS if heard else 0):
            if note is not None or key not in self._won:
                break
            if await self.clock.wait(self._closing, wait):
                return
            wait *= 2
            note = await door.read(late_key(key))
        if note is None or note.kind != "withdrawn":
            return
        row = self._won.pop(key, None)
        if row is None:
            return
        # believed only under a [couriers] key; without a list, recorded as the courier's claim
        checked = self.approver.checked(note, late_key(key), row[0].name, row[2])
        if checked.claimed and self.access is not None and self.access.couriers:
            log.warning("broker %s: a late note on %s naming %r is not believed: the row stays delivered",
                        self.url, row[0].name, note.by)
            return
        says = (f"the courier at {note.by} says, unverified" if checked.claimed else
                f"the courier at {note.by} says, verified")
        what = NOT_RELAYED if note.body.startswith(NOT_RELAYED) else NOT_DELIVERED
        log.warning("broker %s: this node's verdict on %s was %s (%s)", self.url, row[0].name, what, says)
        await self.approver.note_rows([WrittenMark(row[0], row[1], False, why=f"{what} ({says})")])

    async def _late_while_down(self, door: BrokerDoor) -> None:
        """Late notes written while this node was down or away (at start, and after each reconnect:
        the live notice of a note is heard only while connected). A key this node's verdict won in
        this run is read as `_late` reads one. For another, the row the note names is its writer's
        claim: believed only when the key's first value is this node's own signed verdict and the
        row's recorded verdict is exactly it, still noted delivered (a row lowered already is skipped
        before the key is read)."""
        notes = await read_late_notes(door.link, self.request_timeout_s)
        named: dict[str, list[tuple[str, str]]] = {}  # label → (key, request id) of rows not in memory
        for key, note in notes:
            if key in self._won:
                await self._late(door, key)
                continue
            row = late_row_of(note.body, key)
            if row is not None and self.ledger is not None:
                named.setdefault(row[0], []).append((key, row[1]))
        if self.ledger is None:
            return
        ledger, mine = self.ledger, {self.node_key.public: self.node}
        for label, rows in named.items():
            found = await asyncio.to_thread(ledger.recorded_verdicts, label, [r for _, r in rows])
            for key, request_id in rows:
                verdict = found.get(request_id)
                if verdict is None or not verdict.written:
                    continue
                first = await door.read(key)
                if (first is None or first.kind != "verdict"
                        or first.why_not(mine, key, first.parcel_id, first.parcel_digest) is not None):
                    continue
                if verdict.body == first.body.encode("utf-8"):
                    self._won[key] = (AskKey(label, first.parcel_id), request_id, first.parcel_digest)
                    await self._late(door, key)

    async def _late_after_reconnect(self, door: BrokerDoor) -> None:
        """`_late_while_down` after a reconnect, tried again while JetStream is not back yet (a few
        times: the next reconnect reads them again)."""
        for _ in range(LATE_TRIES):
            try:
                await self._late_while_down(door)
                return
            except BROKER_DOWN as exc:
                log.info("broker %s: late notes not read yet (%s); retrying", self.url, exc)
                if await self.clock.wait(self._closing, self.retry_s):
                    return
        log.warning("broker %s: the late notes written while this node was away could not be read", self.url)

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
        won = self.approver.checked(won, held.key, held.record.key.name, held.digest)
        self._withdraw(held, "elsewhere", won.words_for(self.node))

    def _withdraw(self, held: ParcelDoor, outcome: str, words: str) -> None:
        """The ask leaves without this node's verdict (decided elsewhere, past its deadline): its
        record ends withdrawn, the route lets its arbiter go and says why, the message is acknowledged."""
        held.table.move(held.record, "withdrawn")
        self.route.withdrawn(held.record, held.record.parsed, words)
        self._drop(held, outcome, words)

    def _drop(self, held: ParcelDoor, outcome: str, words: str) -> None:
        """The parcel leaves: its record released, its message acknowledged, what became of it noted."""
        held.table.release(held.record)
        if not held.table:
            self._tables.pop(held.table.session_id, None)
        self._held.pop(held.key, None)
        self._remember(held.key)
        self._ack(held.msg)
        self._note(Settled(held.record.key.name, outcome, words))

    def _won_here(self, door: BrokerDoor, key: str, row: WonRow) -> None:
        """This node's verdict won `key`: a courier's late note may lower its row (one already
        written is read now)."""
        self._won[key] = row
        while len(self._won) > REMEMBERED:
            self._won.popitem(last=False)
        self._spawn(self._late(door, key))

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
        unpacked = Unpacked()
        try:
            unpacked = await asyncio.get_running_loop().run_in_executor(
                self._decoder, unpack, msg.data, msg.subject, self.checkpoint)
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
        self.approver.event(ServeEvent("quarantined", key, self.clock.wall(), raw=raw, reason=reason))
        if term:
            self._spawn(terminate(msg))

    async def _serve(self, door: BrokerDoor, msg: Msg, unpacked: Unpacked) -> None:
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
        origin = parcel.hops[-1]
        label = f"nats:{origin.host}/{origin.session_id}"
        ask_key = AskKey(session_id=label, name=parcel.parcel_id)
        already = await self.approver.answered(door, key, ask_key, read, digest)
        if already is not None:
            await msg.ack()
            self._remember(key)
            self._note(Settled(parcel.parcel_id, "elsewhere", already.words_for(self.node)))
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
        if await self.approver.decided_here(ask_key, parsed):  # issue 33: a purged key never reopens it here
            await msg.ack()
            self._remember(key)
            self._note(Settled(parcel.parcel_id, "elsewhere", DECIDED_HERE))
            return
        recorded = await self.approver.recorded(ask_key, parsed)
        if recorded is not None:  # recorded by an earlier run, never written: written as recorded
            won = await self.approver.deliver_body(door, key, ask_key.name, recorded.body, (ask_key, parsed),
                                                   recorded=True, digest=digest)
            self._noted(ask_key.name, recorded.outcome or "recorded", won)
            await msg.ack()
            return
        if ask_key.name in self._tables.get(label, ()):  # a copy under way (a lost record): a later delivery
            return
        table = self._tables.setdefault(label, AskRecords(label))
        record = table.take(ask_key.name)
        held = ParcelDoor(self.approver, door, key, msg, self.clock.monotonic() + left_s, digest, table,
                          record)
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
        won = await self.approver.deliver(door, key, parcel_id, Decision(denial, "refused"), None,
                                         digest=digest)
        self._noted(parcel_id, "refused", won)

    def _noted(self, name: str, outcome: str, won: BrokerDecision | None) -> None:
        self._note(Settled(name, outcome) if won is None else Settled(name, "elsewhere", won.words))

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
