"""The inbox on disk as a door of the route (`core.serving.route`): a request file from the intake that
found it to the report of its answer. The route owns the ask from arrival to delivery; this module
owns what only a file has, and the changes of its record there (`core.serving.records` only rules
whether a change is allowed):

1. taken (`start`): a new file of an intake gets its record;
2. checked (`intake.rejection`): unusable, misaddressed → quarantined with the reason (`quarantine`);
3. restored (`reconcile`): answered by an earlier run, or a response someone else wrote;
4. arrived → judged → escalated → shown → decided: the route (`Route.arrive`), through this
   session's `InboxDoor` (read the file again before a person's decision is written; deliver);
5. answered (`publisher`): recorded and published once; what became of it (`reported`) moves the
   record on, and the publisher's removal of the request (`removed`) frees the name. An ask decided
   at once in its intake's trip (`core.serving.at_once`) takes steps 1-5 on the disk thread, without
   a record, and is reported here once per intake (`answered_at_once`); an answer of it that was not
   plainly written gets its record then, and this module's code as any other.

A step that waits (the quarantine, a restore, the chain, a decision still to come) goes on in a
task of its own, as a file being served (let finish at shutdown). A listing that lacks the file ends
its record (`listed`): an ask withdrawn is never answered. Whatever goes wrong, the file is
quarantined with the reason and serving goes on.

Size: one door, every step of a file through it (taken, checked, restored, answered, reported,
withdrawn, set aside); the rules of a record are `core.serving.records`, the route is
`core.serving.route`, the log lines `core.serving.answer_log`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter

from core.disk.tree import UnsafeFolder
from core.disk.writer import RequestGone
from core.forwarding.inbox import UnreadableRequest
from core.seams import Seams
from core.serving.answer_log import describe, joined, log_answers, told_part, told_parts
from core.serving.at_once import AtOnce
from core.serving.intake import FileRead, Intake, rejection
from core.serving.judgment import Chain, Judge
from core.serving.publisher import Publisher, SettledBatch
from core.serving.quarantine import Kept, Quarantining
from core.serving.reconcile import Earlier, Reconcile, is_forged
from core.serving.records import AWAITING, AskRecord, AskRecords
from core.serving.route import Route
from core.serving.sessions import ServedSession, Sessions
from core.serving.verdicts import Ledger, Published, VerdictRecord
from core.text import log_safe
from core.vocabulary.asks import Answered, Arbiter, Ask, AskKey, Decision
from core.vocabulary.events import RunObserver, ServeEvent, asked, label
from core.wire.request import ParsedRequest
from core.wire.response import encode_response

log = logging.getLogger("pi_authorizer.serve")

Spawn = Callable[[Coroutine[object, object, None], bool], "asyncio.Task[None]"]
"""Run a coroutine alongside; `True`: it serves a file and is let finish at shutdown."""
Rescan = Callable[[ServedSession], Coroutine[object, object, None]]
"""List an inbox again now (a file found changed needs no file event, nor the safety rescan)."""

#: What a person's decision call learns when the request file no longer holds the ask decided.
CHANGED = Answered(False, "the request was withdrawn or replaced by another before this decision was written")
#: What it learns when the request's folder cannot be read (moved away, refused): the ask waits again.
AWAY = Answered(False, "the request's folder cannot be read now; decide again once it is back", gone=False)
#: Why an answer was not written: its child removed its request while the answer waited to be placed.
WITHDRAWN_AT_THE_DISK = ("decided, but its child stopped waiting (its request was removed) before the "
                         "response was written: not written")
#: When a response found before this node's verdict could be written appeared.
BEFORE_OURS = "before this node's verdict could be written"
#: How long a recorded answer the disk refused waits before the next try: doubled after each refusal
#: from the first to the last (on the serving clock), for as long as its request file is there (the
#: child deletes it at its deadline; it can read an answer until then).
DISK_WAIT_S: tuple[float, float] = (1.0, 30.0)


class Pipeline:
    """The inbox's side of the route for every session served (files taken, checked, restored, answered
    by the publisher, set aside), wired once per serving core."""

    def __init__(
        self,
        sessions: Sessions,
        arbiter: Arbiter,
        judge: Judge,
        chain: Chain | None,
        timeout_ms: Callable[[], int],
        reconcile: Reconcile,
        quarantining: Quarantining,
        ledger: Ledger | None,
        seams: Seams,
        emit: Callable[[ServeEvent], None],
        spawn: Spawn,
        rescan: Rescan,
        emit_all: RunObserver | None = None,
    ) -> None:
        """`emit_all`: a run of events told at once (an intake's answers), as `emit` tells each."""
        self.sessions, self.arbiter = sessions, arbiter
        self.emit_all: RunObserver = emit_all or (lambda events: _each(emit, events))
        self.route = Route(arbiter, judge, chain, seams.clock, emit)
        self.timeout_ms, self.reconcile, self.quarantining = timeout_ms, reconcile, quarantining
        self.clock, self.emit, self.spawn, self.rescan = seams.clock, emit, spawn, rescan
        self.publisher = Publisher(ledger, seams, on_removed=self.removed, on_batch=self.reported_batch)
        #: The record of each answer being published, by its request (`id(parsed)`, kept alive here),
        #: with its session when no one waits on it (`_answer_soon`: a forged response is its report's).
        self._answering: dict[int, tuple[AskRecord, ServedSession | None]] = {}
        #: Answers recorded and refused by the disk: when each is tried again, and the wait before it.
        self._disk_waits: dict[AskKey, tuple[float, float]] = {}
        #: Files the quarantine could not take for now: the wait before the next try.
        self._hold_waits: dict[AskKey, float] = {}
        self._keeps_verdicts = ledger is not None

    # -- taken, checked, restored, judged, escalated, shown -------------------------------------

    def start(self, served: ServedSession, name: str, read: FileRead, intake: Intake) -> None:
        """Serve a new file of an intake: its record is taken, and its path runs as far as it can now."""
        self.start_all(served, ((name, read),), intake)

    def start_all(
        self, served: ServedSession, reads: Iterable[tuple[str, FileRead]], intake: Intake
    ) -> None:
        """`start` each new file of an intake (one already tracked is not), with what they share (the
        door, the child's timeout, the moment) worked out once."""
        records, door, timeout_ms = served.records, InboxDoor(self, served, served.records), self.timeout_ms()
        now = self.clock.wall()  # the moment they arrive (served together)
        for name, read in reads:
            if name in records:
                continue
            record = records.take(name)
            record.identity = read.identity
            try:
                self._route(served, record, read, intake, door, timeout_ms, now)
            except Exception as exc:
                self.spawn(self._failed(served, record, exc), True)

    def _route(
        self, served: ServedSession, record: AskRecord, read: FileRead, intake: Intake, door: InboxDoor,
        timeout_ms: int, now: float,
    ) -> None:
        parsed = read.parsed
        if read.gone:
            served.records.release(record)  # gone before it was read: nothing to serve
            return
        reason = rejection(record.key.name, read, served.inbox.session_id)
        if parsed is None:
            why = reason or "unusable request"
            self._go_on(served, record, self._unusable(served, record, why, read.raw))
            return
        if reason is not None:
            self._go_on(served, record, self._unusable(served, record, reason, read.raw))
            return
        earlier = self.reconcile.earlier(parsed, intake, record.key in self._disk_waits)
        if earlier is not None:
            self._go_on(served, record, self._restore(served, record, earlier, parsed))
            return
        judged = intake.judged.get(record.key.name) if intake.judged else None
        if isinstance(judged, Exception):
            raise judged  # its judgment in the trip failed: quarantined with why, never judged twice
        self.route.arrive(door, record, parsed, read.raw, served.inbox.session_id, timeout_ms, now, judged)

    def _go_on(self, served: ServedSession, record: AskRecord, step: Coroutine[object, object, None]) -> None:
        """The rest of the path waits (on the disk, the history): it goes on as a file being served."""
        self.spawn(self._guarded(served, record, step), True)

    async def _unasked(self, served: ServedSession, record: AskRecord, ask: Ask) -> Answered | None:
        """None when the request file still holds the ask the person decided. One replaced, rewritten or
        withdrawn meanwhile is not that ask (`CHANGED`); it ends withdrawn, and the inbox is listed again
        at once: a file rewritten in place while it was shown raised its file event before, so none is
        coming. An inbox that cannot be listed now (moved away, refused) withdraws nothing (`AWAY`)."""
        try:
            raw = await asyncio.to_thread(served.inbox.read_request, record.key.name)
        except (FileNotFoundError, UnreadableRequest, UnsafeFolder):
            raw = None
        away = raw is None and not await asyncio.to_thread(served.inbox.listable)
        if raw == ask.parsed.raw or record.state != "shown":
            return None  # unchanged, or ended meanwhile (answering says so)
        if away and not self._past_deadline(record):
            return AWAY  # past the child's deadline its folder went with it: the child gave up
        served.records.vanish(record.key.name)
        self.emit(ServeEvent("withdrawn", record.key, self.clock.wall(), parsed=ask.parsed))
        log.warning("%s changed or withdrawn before the decision was written", label(record.key, ask.parsed))
        self.spawn(self.rescan(served), False)
        return CHANGED

    # -- answered: handed to the publisher, and what became of it --------------------------------

    def _answer_soon(self, served: ServedSession, record: AskRecord, decision: Decision) -> None:
        """A decision no one waits on (a rule's, a link's, the fail-safe's), without a task: what became
        of it is reported as for any answer (`reported`); a response found already there is quarantined
        as forged, the one outcome that needs a task."""
        if record.state not in AWAITING:
            return
        if served.foreign is not None:  # another server answers this inbox: not raced; served again after
            served.records.release(record)
            return
        self.publisher.enqueue_unwaited(served.inbox, self._verdict(served, record, decision, served))

    async def _answer(self, served: ServedSession, record: AskRecord, decision: Decision) -> Answered:
        """A decision someone waits on (the person's): recorded (durable), published once, in the batch
        ready with it; the publisher then deletes the request (the reference's order)."""
        if record.state not in AWAITING:
            return Answered(False, _gone(record))
        if served.foreign is not None:  # the ask stays in its place; decided once that server is gone
            return Answered(False, f"not written: {served.foreign}", gone=False)
        parsed = record.parsed
        assert parsed is not None
        published = await asyncio.shield(self._enqueue(served, record, decision))
        if published.withdrawn:
            return Answered(False, WITHDRAWN_AT_THE_DISK)
        if published.write_failed is not None and record.state == "unanswered" and self._keeps_verdicts:
            why = (f"waiting for disk ({published.write_failed}): the decision is recorded and is written "
                   "to the child once the disk allows")
            return Answered(False, why, gone=True, waiting=True)
        if published.write_failed is not None:
            # Still waiting only if its record went back to the person (not if the child withdrew meanwhile).
            waits = record.state == "shown"
            return Answered(False, f"writing the response failed: {published.write_failed}", gone=not waits)
        if not published.written:
            await self._forged(served, record, BEFORE_OURS)
            return Answered(False, "a response this node did not write was already there")
        if published.history_failed is not None:
            return Answered(False, f"{published.history_failed}; the child was denied for safety")
        return Answered(True)

    def _enqueue(
        self, served: ServedSession, record: AskRecord, decision: Decision
    ) -> asyncio.Future[Published]:
        return self.publisher.enqueue(served.inbox, self._verdict(served, record, decision, None))

    def _verdict(
        self, served: ServedSession, record: AskRecord, decision: Decision, unwaited: ServedSession | None
    ) -> VerdictRecord:
        """The ask's verdict to publish; its record is `decided` meanwhile."""
        parsed = record.parsed
        assert parsed is not None
        served.records.move(record, "decided")
        self._answering[id(parsed)] = (record, unwaited)
        response = decision.response
        return VerdictRecord(record.key, parsed, response, encode_response(response), decision.outcome,
                             decision.carried_to)

    def reported_batch(self, results: Sequence[tuple[AskKey, Published]]) -> None:
        """What became of the answers of one batch (`reported`), their log lines joined: one line per
        session and `LOG_GROUP` answers under a burst, each answer's part as its own line says it."""
        lines: dict[str, list[str]] | None = {} if len(results) > 1 else None
        now = self.clock.wall()  # one moment for the whole batch
        for key, published in results:
            try:
                self.reported(key, published, lines, now)
            except Exception:  # a bug reporting one answer: the others are reported, their waiters told
                log.exception("%s: reporting its answer failed", label(key, published.verdict.parsed))
        if lines is not None:
            log_answers(lines)

    # -- answered at once, in their intake's trip ----------------------------------------------------

    def at_once(self, served: ServedSession) -> AtOnce | None:
        """What a trip needs to judge this session's asks decided at once (`core.serving.at_once`);
        None while another server answers the inbox (nothing is raced: every file takes the route)."""
        if served.foreign is not None:
            return None
        arbiter = self.route.at_once if self.route.chain is None else None
        return AtOnce(served.inbox.session_id, self.route.judge, self.clock, self.timeout_ms(), arbiter,
                      (served.records, served.settling))

    def settle_at_once(self, served: ServedSession, verdicts: list[VerdictRecord]) -> None:
        """Have the publisher record, publish and remove an intake's asks decided at once, next on its
        disk thread (`Publisher.settle`); their names are held meanwhile, and what became of them is
        reported once for all (`answered_at_once`). Not while another server answers the inbox (seen
        since the trip judged them): their files stay, served again once it is gone (never raced)."""
        if served.foreign is not None:
            return
        names = [verdict.key.name for verdict in verdicts]
        served.settling.update(names)

        def settled(done: asyncio.Future[SettledBatch]) -> None:
            served.settling.difference_update(names)
            if done.cancelled():
                return
            if (failed := done.exception()) is not None:  # a bug: their files are served again
                log.error("session=%s: settling %d answers failed", log_safe(served.inbox.session_id),
                          len(names), exc_info=failed)
                return
            self.answered_at_once(served, *done.result())

        # Reported when done, whatever waits or stops meanwhile (`Publisher.close` waits for it).
        self.publisher.settle_soon(served.inbox, verdicts).add_done_callback(settled)

    def answered_at_once(
        self, served: ServedSession, answered: Sequence[Published], gone: Collection[str] = ()
    ) -> None:
        """What became of an intake's answers decided at once, reported as `reported_batch` reports a
        batch: an answer plainly written whose request is `gone` needs no record; one whose request
        stayed (its removal failed) holds its name by a record `published`, as the route's does, until
        the request goes; any other is reported from a record made for it now, so the route's own code
        waits for the disk or sets a forgery aside."""
        parts: list[str] = []
        lines: dict[str, list[str]] = {served.inbox.session_id: parts}
        now = self.clock.wall()
        if not self._all_plain(served, answered, gone, now, parts):
            self._answered_each(served, answered, gone, now, lines)
        log_answers(lines)

    def _answered_each(
        self, served: ServedSession, answered: Sequence[Published], gone: Collection[str], now: float,
        lines: dict[str, list[str]],
    ) -> None:
        """`answered_at_once`, an answer at a time (`_all_plain` tells a burst's at once, as this does)."""
        parts = lines[served.inbox.session_id]
        records, contested, emit, new = served.records, served.contested, self.emit, tuple.__new__
        plain: list[VerdictRecord] = []  # a run of answers plainly written, told as one (`_told`)
        for published in answered:
            verdict = published.verdict
            key = verdict.key
            try:
                if published.written:
                    if key.name not in gone and key.name not in records:
                        record = records.take(key.name)
                        records.arrive(record, verdict.parsed, verdict.arrived or now)
                        records.move(record, "decided")
                        records.publish(record, published)  # its name held until its request goes
                    if published.history_failed is None and key.name not in contested:
                        # `ServeEvent("answered", key, now, parsed, response, outcome)`, made in C.
                        emit(new(ServeEvent, ("answered", key, now, verdict.parsed, verdict.response,
                                              verdict.outcome, None, None)))
                        plain.append(verdict)
                        continue
                self._told(served, plain, parts, now)  # the answers before this one, first
                if not published.written and not published.withdrawn and key.name not in records:
                    record = records.take(key.name)
                    records.arrive(record, verdict.parsed, verdict.arrived or now)
                    records.move(record, "decided")
                    self._answering[id(verdict.parsed)] = (record, served)
                self.reported(key, published, lines, now)
            except Exception:  # a bug reporting one answer: the others are reported
                log.exception("%s: reporting its answer failed", label(key, verdict.parsed))
        self._told(served, plain, parts, now)

    def _all_plain(
        self, served: ServedSession, answered: Sequence[Published], gone: Collection[str], now: float,
        parts: list[str],
    ) -> bool:
        """When every answer of an intake was plainly written (recorded, placed, its request gone, no
        other server's answer under its name: a burst's), reported as `answered_at_once` reports each,
        but without a Python step per answer: their columns taken apart at once, their `answered`
        events made and told as one run (`emit_all`). False, with nothing reported, otherwise."""
        if not answered:
            return False
        verdicts, refused = list(map(_VERDICT, answered)), list(map(_HISTORY_FAILED, answered))
        names, contested = list(map(_NAME, verdicts)), served.contested
        if not (all(map(_WRITTEN, answered)) and refused.count(None) == len(refused)
                and all(map(gone.__contains__, names)) and not any(map(contested.__contains__, names))):
            return False
        count = len(verdicts)
        # `ServeEvent("answered", key, now, parsed, response, outcome)` each, made in C.
        fields = zip(repeat("answered", count), map(_KEY, verdicts), repeat(now), map(_PARSED, verdicts),
                     map(_RESPONSE, verdicts), map(_OUTCOME, verdicts), repeat(None), repeat(None))
        self.emit_all(list(map(tuple.__new__, repeat(ServeEvent), fields)))
        self._told(served, verdicts, parts, now)
        return True

    def _told(self, served: ServedSession, plain: list[VerdictRecord], parts: list[str], now: float) -> None:
        """A run of answers plainly written (each one's `answered` event emitted), reported as
        `reported` reports each: their names noted answered, their log parts in order, with what they
        share worked out once (`answer_log.told_parts`); `plain` is emptied."""
        if not plain:
            return
        served.note_answered_all(list(map(_NAME, plain)))
        try:
            parts.extend(told_parts(plain, now))
        except Exception:  # a bug making one answer's part: the others are logged
            for verdict in plain:
                try:
                    parts.append(told_part(verdict, now))
                except Exception:
                    log.exception("%s: reporting its answer failed", label(verdict.key, verdict.parsed))
        plain.clear()

    def reported(
        self, key: AskKey, published: Published, lines: dict[str, list[str]] | None = None,
        now: float | None = None,
    ) -> None:
        """The publisher says what became of one answer of a batch, on the event loop, before anyone
        waiting on it resumes (so a serving task cancelled at shutdown loses no report): the record
        moves on, observers are told. `lines`: the answer's log line is joined to its batch's (by
        session) instead of logged alone, at `now` (its batch's moment)."""
        verdict = published.verdict
        served = self.sessions.by_id.get(key.session_id)
        answering, unwaited = self._answering.pop(id(verdict.parsed), (None, None))
        record = answering if answering is not None and answering.state == "decided" else None
        if not published.written and published.write_failed is None and not published.withdrawn:
            # A response was already there: the request is quarantined as forged (by the answer's path
            # when someone waits on it), decided first so nothing else of this report can skip it.
            if unwaited is not None and answering is not None:
                self.spawn(self._forged(unwaited, answering, BEFORE_OURS), True)
            return
        if served is not None and published.written and key.name in served.contested:
            # Placed, but the other server's rename replaces it (or did): not the answer known delivered.
            self.sessions.contest(served, key.name, served.contested[key.name])
        if published.withdrawn:
            # Its request was gone just before the answer would have been placed: its child gave up,
            # and nothing was placed. The row ends withdrawn with why (the verdict was never read).
            self._disk_waits.pop(key, None)
            if served is not None and record is not None:
                served.records.move(record, "withdrawn")
            self.emit(ServeEvent("withdrawn", key, self.clock.wall(), parsed=verdict.parsed,
                                 reason=WITHDRAWN_AT_THE_DISK))
            log.info("%s withdrawn by the child before its answer was written; not written",
                     label(key, verdict.parsed))
            return
        if published.write_failed is not None:
            error = published.write_failed
            if served is not None and record is not None and not record.vanished and (
                published.history_failed is None and self._keeps_verdicts
            ):
                # Recorded: the recorded verdict is published as it is once the disk allows.
                self._wait_for_disk(served, record, error)
                return
            log.error("%s: writing the response failed: %s", label(key, verdict.parsed), error)
            failed = ServeEvent("answer_failed", key, self.clock.wall(), parsed=verdict.parsed, reason=error)
            self.emit(failed)
            if served is not None and record is not None:
                if record.vanished:  # its file went while the answer was written: the child gave up
                    served.records.move(record, "withdrawn")
                    self.emit(ServeEvent("withdrawn", key, self.clock.wall(), parsed=verdict.parsed))
                elif verdict.by_person:
                    served.records.move(record, "shown")  # the person's ask stays pending, in its place
                else:
                    served.records.move(record, "unanswered")  # served anew at the next rescan, or withdrawn
            return
        if not published.written:
            return  # a response was already there: set aside as forged above
        if served is not None:
            served.note_answered(key.name)
            if record is not None:
                served.records.publish(record, published)
        self._disk_waits.pop(key, None)
        now = self.clock.wall() if now is None else now
        response, outcome = verdict.response, verdict.outcome
        # With the ledger's refusal as its reason, the history closes the row as fail-safe from it.
        reason = published.history_failed
        self.emit(ServeEvent("answered", key, now, verdict.parsed, response, outcome, reason))
        waited = None if record is None else now - record.arrived_at
        if lines is None:
            log.info("%s %s", label(key, verdict.parsed), describe(response, outcome, waited))
        else:
            part = f"{asked(key, verdict.parsed)} {describe(response, outcome, waited)}"
            lines.setdefault(key.session_id, []).append(joined(part))

    def removed(self, gone: Sequence[tuple[AskKey, Published]]) -> None:
        """The publisher removed these answered requests: their names are free for new requests (each
        only if it still stands for that answer: a removal seen first by the watcher already freed it)."""
        for key, published in gone:
            served = self.sessions.by_id.get(key.session_id)
            record = served.records.get(key.name) if served is not None else None
            if served is not None and record is not None and record.published is published:
                served.records.release(record)

    def settled(self, served: ServedSession, names: Collection[str]) -> bool:
        """The watcher saw these requests removed (by us, or by their children): True when each was
        answered (no rescan), and its name is free. One answered at once has no record: its removal is
        no news while its answer is being settled or once it was (`note_answered`). A read's removals
        (a burst's, one per ask) are looked up together; each is looked at alone (`_settled`, in order)
        when one of them has a record."""
        settling, answered = served.settling, served.answered
        if not served.records.held(names):  # each settling, or answered: set work, no step per name
            return answered.keys() >= set(names).difference(settling)
        quiet = True
        for name in names:
            quiet = self._settled(served, name) and quiet  # each one's record released, whatever
        return quiet

    @staticmethod
    def _settled(served: ServedSession, name: str) -> bool:
        record = served.records.get(name)
        if record is None:
            return name in served.settling or name in served.answered
        if record.state != "published":
            return False
        served.records.release(record)
        return True

    # -- restored: what an earlier run left --------------------------------------------------------

    async def _restore(
        self, served: ServedSession, record: AskRecord, earlier: Earlier, parsed: ParsedRequest | None
    ) -> None:
        if not record.live:
            return  # withdrawn before its turn
        key, request_id = record.key, earlier.request_id
        if earlier.kind == "forged":
            assert parsed is not None
            await self._forged(served, record, "before this node served the request", parsed)
        elif earlier.kind == "consumed":
            assert parsed is not None
            reason = f"request id {request_id!r} was already answered by this node; not answered twice"
            await self._unusable(served, record, reason, parsed.raw, answer=False)
        elif earlier.kind == "answered":
            # An earlier run died between answering and deleting the request: it is answered.
            served.records.move(record, "published")
            served.note_answered(key.name)
            await self.reconcile.note_written(key, earlier)
            await self._remove_request(served, record)
            log.info("%s was answered by this node before a restart; request removed", label(key, None))
        else:
            assert earlier.recorded is not None
            served.records.move(record, "decided")
            try:
                written = await self.reconcile.publish(served, earlier, key.name)
            except RequestGone:  # its child stopped waiting meanwhile: never placed, the row ends so
                self._disk_waits.pop(key, None)
                served.records.move(record, "withdrawn")
                self.emit(ServeEvent("withdrawn", key, self.clock.wall(), parsed=parsed,
                                     reason=WITHDRAWN_AT_THE_DISK))
                log.info("%s recorded verdict not published after a restart: its child deleted its request",
                         label(key, parsed))
                return
            except UnsafeFolder:
                raise
            except OSError as exc:  # a full or failing disk: the recorded verdict waits, never set aside
                if record.state == "decided":
                    self._wait_for_disk(served, record, str(exc))
                return
            self._disk_waits.pop(key, None)
            if not written and not await asyncio.to_thread(served.inbox.response_is, request_id,
                                                           earlier.recorded.body):
                # Someone else's response took the name: never marked as this node's delivered verdict.
                if parsed is not None:
                    await self._forged(served, record, BEFORE_OURS, parsed)
                else:
                    reason = (f"FORGED RESPONSE: responses/{request_id}.json holds bytes this node did "
                              "not record for this request; it was not written by this node")
                    await self._unusable(served, record, reason, None, answer=False)
                return
            written = True  # the exact recorded bytes: this node's own answer (an earlier attempt's)
            served.records.advance(record, "published")
            served.note_answered(key.name)
            if written:  # visible now: reported before anything else can fail
                self.emit(self.reconcile.answered(key, parsed, earlier.recorded))
            await self.reconcile.mark(key, request_id, written)
            log.info("%s recorded verdict published after a restart", label(key, None))
            await self._remove_request(served, record)

    async def _remove_request(self, served: ServedSession, record: AskRecord) -> None:
        """Delete an answered request; once gone, its name is free for a new request."""
        await asyncio.to_thread(served.inbox.delete_request, record.key.name)
        served.records.release(record)

    # -- a listing: what it says of the records ----------------------------------------------------

    async def listed(self, served: ServedSession, present: set[str], retry: frozenset[str]) -> None:
        """A listing of the inbox: a file gone from it ends its record, and an ask it held before any
        decision was withdrawn by its child (its terminal is told); a decision that could not be
        written is served anew; an ask still held whose response someone else wrote is forged."""
        records = served.records
        # Set work over the names, not a walk over thousands of records: only those gone or retried.
        for name in sorted(records.names() - present):
            if (record := records.get(name)) is not None:
                self._disk_waits.pop(record.key, None)
                self._vanished(served, name)
        for name in sorted(retry & present):
            record = records.get(name)
            if record is not None and record.state == "unanswered" and self._due(record.key):
                records.release(record)
        waiting = records.awaiting()  # the same dict while no record changes (never mutated)
        if not waiting:
            return
        responses = await self.reconcile.responses(served)
        if responses is None:
            return
        # A response is named as its request (`<id>.json`, checked when the file was taken in).
        for name in sorted(responses & waiting.keys()):
            record = waiting[name]
            if is_forged(record, responses):
                self.arbiter.withdraw(record.key)
                await self._forged(served, record, "while the ask waited for this node's verdict")

    def _wait_for_disk(
        self, served: ServedSession, record: AskRecord, error: str,
        what: str = "the recorded answer is written",
    ) -> None:
        """A recorded answer the disk refused after the retries (full, failing): never a reason to set the
        request aside. It waits (`unanswered`) and is published as recorded by a later rescan, after a
        wait doubled at each refusal (`DISK_WAIT_S`), for as long as its request file is there."""
        known = self._disk_waits.get(record.key)
        first, longest = DISK_WAIT_S
        wait = first if known is None else min(known[1] * 2, longest)
        self._disk_waits[record.key] = (self.clock.monotonic() + wait, wait)
        served.records.move(record, "unanswered")
        reason = f"waiting for disk: {error}; {what} once the disk allows"
        if known is None or wait < longest or known[1] < longest:
            log.warning("%s %s (next try in %.0fs)", label(record.key, record.parsed), reason, wait)
        now = self.clock.wall()
        self.emit(ServeEvent("answer_failed", record.key, now, parsed=record.parsed, reason=reason))

    def _due(self, key: AskKey) -> bool:
        known = self._disk_waits.get(key)
        return known is None or self.clock.monotonic() >= known[0]

    def gave_up(self, served: ServedSession) -> None:
        """An inbox that cannot be listed withdraws no ask, except one past its child's deadline: that
        child has stopped waiting, and a child that gives up deletes its request and then the folders
        it emptied (pi's `cleanupPermissionForwardingLocationIfEmpty`), so no listing will ever lack it."""
        for record in served.records:
            if record.state in AWAITING and self._past_deadline(record):
                self._vanished(served, record.key.name)

    def _past_deadline(self, record: AskRecord) -> bool:
        parsed = record.parsed
        return parsed is not None and self.clock.wall() * 1000 >= (parsed.request.created_at
                                                                    + self.timeout_ms())

    def _vanished(self, served: ServedSession, name: str) -> None:
        record = served.records.vanish(name)
        if record is None or record.state != "withdrawn":
            return
        self.route.withdrawn(record, record.parsed)
        log.info("%s withdrawn by the child before an answer", label(record.key, record.parsed))

    # -- quarantined: unusable, forged, or failed --------------------------------------------------

    async def _unusable(
        self, served: ServedSession, record: AskRecord, reason: str, raw: bytes | None, answer: bool = True
    ) -> None:
        if not record.live:
            return  # withdrawn before its turn
        kept = await self.quarantining.unusable(served, record.key, reason, raw, answer)
        if kept is None:  # its denial or its history row waits for the disk: the file stays, served again
            if record.state in ("taken", "decided"):
                why = "its explained denial or its history row could not be written"
                self._wait_for_disk(served, record, why,
                                    what="the unusable request is answered and set aside")
            else:
                served.records.release(record)
            return
        self._quarantined(served, record, kept)

    async def _forged(
        self, served: ServedSession, record: AskRecord, when: str, parsed: ParsedRequest | None = None
    ) -> None:
        parsed = parsed or record.parsed
        assert parsed is not None
        if served.foreign is not None:  # another server answers this inbox: its answer, not a forgery
            self.answered_elsewhere(served, record.key.name)
            self.sessions.contest(served, record.key.name, served.contested.get(record.key.name))
            return
        kept = await self.quarantining.forged(served, record.key, parsed, when)
        self._quarantined(served, record, kept)

    def _quarantined(self, served: ServedSession, record: AskRecord, kept: Kept) -> None:
        """A file that could not be moved is `held` (left in place, ignored); one moved out frees its name.
        One the disk refused for now (`Kept.waits`) is held for a wait doubled at each refusal
        (`DISK_WAIT_S`), then served again, and so set aside once the disk allows."""
        if kept.held and record.live and record.state != "held":
            served.records.move(record, "held")
        elif not kept.held:
            served.records.release(record)
            self._hold_waits.pop(record.key, None)
        self.quarantining.report(served, kept)
        if kept.waits and record.state == "held":
            self.spawn(self._set_aside_later(served, record), False)

    async def _set_aside_later(self, served: ServedSession, record: AskRecord) -> None:
        first, longest = DISK_WAIT_S
        known = self._hold_waits.get(record.key)
        wait = self._hold_waits[record.key] = first if known is None else min(known * 2, longest)
        await self.clock.wait(asyncio.Event(), wait)
        if served.records.get(record.key.name) is record and record.state == "held":
            served.records.release(record)  # read again at once: set aside, or held again
            await self.rescan(served)

    async def _guarded(
        self, served: ServedSession, record: AskRecord, step: Coroutine[object, object, None]
    ) -> None:
        """Run a step of the path; whatever goes wrong, the file is quarantined with the reason."""
        try:
            await step
        except Exception as exc:
            await self._failed(served, record, exc)

    async def _failed(self, served: ServedSession, record: AskRecord, exc: Exception) -> None:
        """A step of the path raised: the file is quarantined with the reason (a refused session
        tree is reported instead, and the file served once the tree is sound)."""
        if isinstance(exc, UnsafeFolder):
            self._leave_arbiter(record)
            served.records.release(record)
            self.sessions.report_unsafe(served, "inbox", exc, "this session's requests are not served")
            return
        log.error("%s: serving failed", label(record.key, None), exc_info=exc)
        if not record.live:
            return  # its file is gone (withdrawn, or answered and removed): nothing to quarantine
        self._leave_arbiter(record)
        reason = f"serving this file failed ({type(exc).__name__}: {exc})"
        await self._unusable(served, record, reason, None)

    def answered_elsewhere(self, served: ServedSession, name: str) -> None:
        """Another server answered (or is answering) the request `name`: an ask of it still undecided
        here leaves the person's queue, saying so (not "the child stopped waiting"), and its name is
        freed; this node does not answer it."""
        record = served.records.get(name)
        if record is None or record.state not in AWAITING:
            return
        if record.state == "shown":
            self.arbiter.withdraw(record.key, f"answered by another server ({served.foreign or 'seen'})")
        served.records.release(record)

    def _leave_arbiter(self, record: AskRecord) -> None:
        if record.state == "shown":
            self.arbiter.withdraw(record.key)


def _each(emit: Callable[[ServeEvent], None], events: Sequence[ServeEvent]) -> None:
    for event in events:
        emit(event)


_NAME, _KEY, _PARSED = attrgetter("key.name"), attrgetter("key"), attrgetter("parsed")
_VERDICT, _WRITTEN = attrgetter("verdict"), attrgetter("written")
_HISTORY_FAILED = attrgetter("history_failed")
_RESPONSE, _OUTCOME = attrgetter("response"), attrgetter("outcome")


def _gone(record: AskRecord) -> str:
    if record.state in ("decided", "published"):
        return "this request was already answered"
    if record.state == "held":
        return "this request was set aside"
    return "the child withdrew this request"


@dataclass(frozen=True, slots=True)
class InboxDoor:
    """The inbox on disk as the route's door (`core.serving.door.Door`), for one served session: a
    decision is delivered by the publisher (recorded in the history in its batch, then linked into
    place), a person's decision is checked against the request file first, and whatever goes wrong
    sets the file aside in the quarantine with the reason."""

    pipeline: Pipeline
    served: ServedSession
    records: AskRecords  # the session's (never replaced), read by the route at every step
    def go_on(
        self, record: AskRecord, step: Coroutine[object, object, None], finish: bool
    ) -> asyncio.Task[None]:
        return self.pipeline.spawn(self.pipeline._guarded(self.served, record, step), finish)

    def answer_soon(self, record: AskRecord, decision: Decision) -> None:
        self.pipeline._answer_soon(self.served, record, decision)

    async def read(self, record: AskRecord, ask: Ask, decision: Decision) -> Answered | None:
        """Only a decision someone waits on (the person's) can be older than its file's bytes."""
        if decision.reply is None:
            return None
        return await self.pipeline._unasked(self.served, record, ask)

    async def deliver(self, record: AskRecord, decision: Decision) -> Answered:
        return await self.pipeline._answer(self.served, record, decision)

    def acknowledge(self, record: AskRecord, outcome: str, words: str = "") -> None:
        """Nothing to let go of: the file stays in its place (for another authorizer) until its listing
        lacks it."""
