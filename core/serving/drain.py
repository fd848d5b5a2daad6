"""Draining an inbox: its listing diffed against the session's records.

A new file goes down its route (`core.serving.pipeline.Pipeline.start`); what a listing says of the
files already known (gone: withdrawn; forged responses) the route decides too (`listed`). An inbox
that cannot be listed (its folder missing, or refused) ends no record. New files are read in batches
(`core.serving.intake`) so the answers ready at once share one batch of the publisher.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from core.disk.tree import UnsafeFolder
from core.forwarding.inbox import FileIdentity
from core.serving.intake import INTAKE_FILES, SETTLE_FILES, Intake, Listing, scan, take_in
from core.serving.pipeline import Pipeline
from core.serving.records import AWAITING, AskRecords
from core.serving.sessions import ServedSession, Sessions
from core.serving.verdicts import Ledger
from core.text import log_safe

log = logging.getLogger("pi_authorizer.serve")

#: A safety rescan looks again at the file of at least this many asks awaiting a decision (all of them
#: up to this many), and at a `SPREAD_PASSES`-th of them beyond: with thousands waiting, each is
#: looked at every few passes instead of all at every pass. A rescan a file event asked for looks at
#: every one; a decision re-reads its file before it is written (`Pipeline._unasked`) whatever a
#: rescan saw.
IDENTITY_CHECKS = 256
SPREAD_PASSES = 8
#: A safety pass reuses the last listing of an inbox while its `requests/` is unchanged since
#: (`core.serving.intake.Listing`), and lists it anyway at least once every this many passes.
RELIST_PASSES = 8


@dataclass
class _Derived:
    """What a pass derived from a session's records, kept while the records do not change."""

    records: AskRecords | None = None  # the very records derived from (a session taken again has new ones)
    changes: int = -1
    retry: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
    watched: dict[str, FileIdentity] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # the watched names, the safety passes' round
    turn: int = 0  # where the next safety pass's look starts in `order`


class Drain:
    """Rescans of the sessions served."""

    def __init__(self, sessions: Sessions, ledger: Ledger | None, pipeline: Pipeline) -> None:
        self.sessions, self.ledger, self.pipeline = sessions, ledger, pipeline
        self._derived: dict[str, _Derived] = {}
        #: Each inbox's last listing, and how many safety passes reused it in a row.
        self._listings: dict[str, tuple[Listing, int]] = {}

    async def rescan(self, served: ServedSession, safety: bool = False) -> None:
        """Diff the inbox listing against the records: new files are served, vanished ones withdrawn.
        `safety`: the periodic pass for what a watch missed (the files of asks awaiting a decision
        are looked at a share at a time, `IDENTITY_CHECKS`).

        Never raises: one file's failure quarantines that file, a listing failure marks the session
        unservable (heartbeat removed) until listing works again.
        """
        async with served.scan_lock:
            if served.foreign is not None:
                return  # another server answers this inbox: this node does not race it
            try:
                await self._drain(served, safety)
            except UnsafeFolder as exc:
                why = "this session's requests are not served"
                self.sessions.report_unsafe(served, "inbox", exc, why)
                self.sessions.set_unservable(served, f"a folder of its inbox is refused: {exc}")
                return
            self.sessions.clear_unsafe(served, "inbox")

    def _derive(self, served: ServedSession) -> _Derived:
        """The names to retry, those known and the identities watched: derived again only after the
        records changed (a quiet queue of thousands costs no walk over them each second)."""
        records = served.records
        derived = self._derived.get(served.inbox.folder_name)
        if derived is not None and derived.records is records and derived.changes == records.changes:
            return derived
        retry = records.unanswered()  # a decision not written: the file is served anew
        # The asks awaiting this node's decision, by the file each was read from: another file under
        # the name (renamed over, rewritten) is that ask withdrawn and a new ask, never the old one's
        # bytes. (Not a `left` ask: another authorizer may be answering it in place.)
        watched = {record.key.name: record.identity for record in records
                   if record.state in AWAITING and record.identity is not None}
        turn = 0 if derived is None else derived.turn
        known = records.names() - retry
        derived = _Derived(records, records.changes, retry, known, watched, list(watched), turn)
        self._derived[served.inbox.folder_name] = derived
        return derived

    @staticmethod
    def _share(derived: _Derived) -> list[str]:
        """The watched names a safety pass looks at: the next share of the round."""
        order = derived.order
        size = max(IDENTITY_CHECKS, -(-len(order) // SPREAD_PASSES))
        if size >= len(order):
            return order
        start = derived.turn % len(order)
        derived.turn = start + size
        return order[start:start + size] + order[:max(0, start + size - len(order))]

    async def _drain(self, served: ServedSession, safety: bool = False) -> None:
        """One pass over the inbox; raises `UnsafeFolder` when a folder of the session tree is refused."""
        on_disk = self.pipeline.publisher.on_disk
        derived = self._derive(served)
        retry, known, watched = derived.retry, derived.known, derived.watched
        if served.settling:  # their answers are being settled: not new files
            known = known | served.settling
        check = self._share(derived) if safety else None
        folder = served.inbox.folder_name
        last = self._listings.pop(folder, None)
        # Only a safety pass reuses a listing (a file event always lists again), and not every time.
        kept = last[0] if safety and last is not None and last[1] < RELIST_PASSES else None
        lane = self.pipeline.at_once(served)
        try:
            # One trip off the loop lists the inbox, reads the first batch of new files and judges those
            # decided at once (`core.serving.at_once`), so a burst is judged, recorded and published
            # together (and a single ask pays one trip). On the disk thread when it is free; else on a
            # thread of its own: a new ask is read while a write hangs or waits to be retried.
            serve = None if lane is None else lane.serve
            run = on_disk if self.pipeline.publisher.idle() else asyncio.to_thread
            found = await run(scan, served.inbox, known, self.ledger, watched, check, kept, serve)
        except UnsafeFolder:
            raise
        except Exception as exc:
            self.sessions.set_unservable(served, f"its inbox cannot be listed: {exc}")
            return
        self.sessions.set_unservable(served, None)
        if found.listing is not None:
            reused = kept is not None and found.listing is kept
            self._listings[folder] = (found.listing, last[1] + 1 if reused and last is not None else 0)
        names, intake = found.names, found.intake
        if names is None:
            # No session folder or no `requests/`: moved away (and maybe back), or not made yet. That
            # says nothing of the files: an ask is withdrawn only once a listing of its folder lacks
            # its file, and the files back with the folder are the asks still held (never served twice).
            # Save an ask past its child's deadline: that child gave up and removed the emptied folders.
            self.pipeline.gave_up(served)
            return
        # Only asks still awaiting a decision: one decided meanwhile has its answer on the way.
        replaced = {name for name in found.replaced
                    if (record := served.records.get(name)) is not None and record.state in AWAITING}
        if replaced:
            log.warning("session=%s: %d request file(s) replaced under their names: the asks read from "
                        "them are withdrawn, the new files served as new asks",
                        log_safe(served.inbox.session_id), len(replaced))
        # Without a record, a listing ends none (nor is any retried): no set of a burst's thousands of names.
        present = set(names) - replaced if len(served.records) else set()
        await self.pipeline.listed(served, present, retry)
        # As `scan` listed them (the intakes follow this order); one decided meanwhile is not started.
        new = found.new
        while intake is not None:
            new = new[intake.taken :]
            if intake.at_once:  # before the next trip is asked for: the disk thread settles them first
                self.pipeline.settle_at_once(served, intake.at_once)
            # The rest of a burst: on the publisher's disk thread, taking turns with its commits
            # instead of trading the interpreter lock with them at every system call; the next
            # intake is asked for before this one is judged, so it is read while the loop judges.
            ahead = None
            if new:
                # Another server seen meanwhile: nothing more is answered at once (the route leaves it).
                serve = None if lane is None or served.foreign is not None else lane.serve
                count = INTAKE_FILES if serve is None else SETTLE_FILES
                trip = on_disk(take_in, served.inbox, new[:count], self.ledger, serve)
                ahead = asyncio.ensure_future(trip)
            try:
                await self._serve_batch(served, intake)
            except BaseException:
                if ahead is not None:
                    ahead.cancel()
                raise
            intake = await ahead if ahead is not None else None

    async def _serve_batch(self, served: ServedSession, intake: Intake) -> None:
        """Serve the files of one intake concurrently: their answers join one batch of the publisher.

        Returns once each has been judged and handed on (not published): the next intake is judged
        while this batch is being committed, and waits only when the publisher is a batch behind.
        """
        self.pipeline.start_all(served, intake.reads, intake)
        await asyncio.sleep(0)  # the files served in a task run up to their answer, or into their terminal
        await self.pipeline.publisher.room()
