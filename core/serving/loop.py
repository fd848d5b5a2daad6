"""The serving core: it wires the stages of serving once and runs the loop that drains each served
inbox and hands every new request file down its route.

One undecided ask never blocks the inbox: rule-decided asks keep flowing while a person (or a slow
chain link) thinks, and every session is rescanned as soon as inotify says it changed. What a rescan
finds is read in one trip off the event loop (`core.serving.intake`, by `core.serving.drain`) and
served together, so the answers ready at once share one group commit (`core.serving.publisher`). Every
ask goes down the one route (`core.serving.route`); the inbox is its door (`core.serving.pipeline`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path

from core.disk.tree import Anchor
from core.forwarding.watch import ExhaustedReport, watch_session_folders
from core.seams import PRODUCTION, Seams
from core.serving.drain import Drain
from core.serving.judgment import Chain, Judge, NoRecordedAuthority
from core.serving.pipeline import Pipeline
from core.serving.quarantine import Quarantine, Quarantining
from core.serving.reconcile import Reconcile
from core.serving.sessions import ServedSession, Sessions
from core.serving.verdicts import Ledger
from core.vocabulary.asks import DEFAULT_FORWARDING_TIMEOUT_MS, Arbiter
from core.vocabulary.events import Observer, RunObserver, ServeEvent

log = logging.getLogger("pi_authorizer.serve")

SAFETY_RESCAN_S = 1.0
#: After a failing loop step, wait this long before the step runs again (no hot error loop).
STEP_FAILURE_PAUSE_S = 1.0
#: At shutdown, how long the files already taken in may take to be served to the end; past it, the
#: answers no one waits on that have not begun are left for the next start (`Publisher.close`).
SHUTDOWN_GRACE_S = 10.0


class ServingCore:
    """Serves a set of sessions under one forwarding root until `stop()`."""

    def __init__(
        self,
        forwarding_root: Path,
        state_dir: Path,
        arbiter: Arbiter,
        judge: Judge | None = None,
        chain: Chain | None = None,
        timeout_ms: Callable[[], int] = lambda: DEFAULT_FORWARDING_TIMEOUT_MS,
        ledger: Ledger | None = None,
        seams: Seams = PRODUCTION,
    ) -> None:
        self.root = forwarding_root
        self.arbiter, self.judge, self.chain = arbiter, judge or NoRecordedAuthority(), chain
        self.timeout_ms, self.seams = timeout_ms, seams
        self.tree = Anchor(forwarding_root, "forwarding root")
        self.state_tree = Anchor(state_dir, "state dir")
        self._observers: tuple[Observer, ...] = ()  # a new tuple per subscriber: none copied per event
        self._runs: tuple[RunObserver, ...] = ()  # how each is told a run of events (`_emit_all`)
        #: The sessions served; a front end sees them as `ServedSessions`.
        self.served = Sessions(forwarding_root, state_dir, self.tree, self.state_tree, seams, self._emit)
        self.quarantine = Quarantine(state_dir, self.state_tree, seams)
        quarantining = Quarantining(self.quarantine, self.served, self._emit, seams, ledger)
        self.pipeline = Pipeline(
            self.served,
            arbiter,
            self.judge,
            chain,
            timeout_ms,
            Reconcile(ledger, seams),
            quarantining,
            ledger,
            seams,
            self._emit,
            self._spawn,
            self.rescan,
            self._emit_all,
        )
        self.drain = Drain(self.served, ledger, self.pipeline)
        self._stop = asyncio.Event()
        self._exhausted = ExhaustedReport()  # the watches used up: said once for this node
        self._tasks: set[asyncio.Task[None]] = set()
        #: Each session's rescan task (by inbox folder) and the sessions told of a change meanwhile.
        self._rescans: dict[str, asyncio.Task[None]] = {}
        self._rescan_again: set[str] = set()
        self._serving: set[asyncio.Task[None]] = set()
        self._background: list[Callable[[asyncio.Event], Coroutine[object, object, None]]] = []
        #: `run` has ended: nothing of this core writes any more (its ledger may be closed).
        self.ended = False

    # -- lifecycle ------------------------------------------------------------------------------

    def subscribe(self, observer: Observer, run: RunObserver | None = None) -> None:
        """Add an observer; folders already refused (found by `add_session`) are reported to it at once.
        `run`: how it is told a run of events at once (an intake's answers), as `observer` would be
        told each of them in order; without one, it is told each."""
        self._observers = (*self._observers, observer)
        self._runs = (*self._runs, run or _each(observer))
        for served in self.served:
            for event in served.problems.values():
                observer(event)

    def add_background(self, task: Callable[[asyncio.Event], Coroutine[object, object, None]]) -> None:
        """A coroutine to run alongside serving, given the stop event (config watching...)."""
        self._background.append(task)

    def add_session(self, raw_id: str) -> ServedSession:
        """Take a session: lock it, publish the heartbeat. Raises `SessionHeld` if served elsewhere."""
        served, new = self.served.add(raw_id)
        if new and self._tasks:
            self._spawn(self.rescan(served))
        return served

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Serve until `stop()`; on exit heartbeats are removed and locks released."""
        try:
            self._spawn(self.served.heartbeat_loop(self._stop))
            self._spawn(self._watch_loop())
            self._spawn(self._safety_rescan_loop())
            for background in self._background:
                self._spawn(background(self._stop))
            try:
                self.quarantine.prune()
            except OSError as exc:
                log.warning("pruning the quarantine failed: %s", exc)
            # The first pass is a task like the others: a stop during it (a start's backlog of
            # thousands of files, each trip slow on a full history) is not held until it ends.
            self._spawn(self.rescan_all())
            await self._stop.wait()
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        self._stop.set()
        grace_over = self.seams.clock.monotonic() + SHUTDOWN_GRACE_S
        current = asyncio.current_task()
        pending = [t for t in self._tasks if t is not current]
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._serving:
            # Files already taken in are served to the end (answered, or handed to their arbiter),
            # for at most the grace on the clock.
            late = await self._served_within(set(self._serving), SHUTDOWN_GRACE_S)
            for task in late:
                task.cancel()
        await self.pipeline.publisher.close(leave_after=grace_over)
        self.served.release()
        self.tree.close()
        self.state_tree.close()
        self.ended = True

    def _spawn(self, coro: Coroutine[object, object, None], serving: bool = False) -> asyncio.Task[None]:
        """Run `coro` alongside; a `serving` one (a file being served) is let finish at shutdown."""
        task = asyncio.ensure_future(coro)
        (self._serving if serving else self._tasks).add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._serving.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("serving task failed", exc_info=task.exception())

    async def _served_within(self, tasks: set[asyncio.Task[None]], seconds: float) -> set[asyncio.Task[None]]:
        """Wait until `tasks` are done or `seconds` passed on the clock; those still running."""
        all_done = asyncio.Event()
        left = {task for task in tasks if not task.done()}

        def done(task: asyncio.Task[None]) -> None:
            left.discard(task)
            if not left:
                all_done.set()

        for task in left:
            task.add_done_callback(done)
        if left:
            await self.seams.clock.wait(all_done, seconds)
        return {task for task in tasks if not task.done()}

    async def _pause(self, seconds: float) -> None:
        """`seconds` on the clock, or less when serving stops."""
        await self.seams.clock.wait(self._stop, seconds)

    async def _watch_loop(self) -> None:
        """Supervised: a failing watcher is logged with its traceback and started again."""
        while not self._stop.is_set():
            try:
                seams = self.seams
                async for folders in watch_session_folders(
                    self.root, self._stop, seams.force_polling, self.tree, self._settled, seams.clock,
                    wanted=lambda folder: folder in self.served.by_folder,
                    foreign=self._foreign_writer, fault=seams.fault, exhausted=self._exhausted,
                ):
                    targets = (
                        list(self.served)
                        if not folders
                        else [s for f in folders if (s := self.served.by_folder.get(f))]
                    )
                    for served in targets:
                        self._rescan_soon(served)
            except Exception:
                log.error("watching the forwarding root failed; restarting the watch", exc_info=True)
                await self._pause(STEP_FAILURE_PAUSE_S)

    def _foreign_writer(self, folder: str, pid: int, target: str) -> None:
        """Another process writes temp files in a served inbox's `responses/`: another server, whose
        rename replaces whatever answer `target` holds."""
        served = self.served.by_folder.get(folder)
        if served is not None:
            self.served.note_foreign_writer(served, pid, target)
            if served.foreign is not None:
                self.pipeline.answered_elsewhere(served, target)

    def _settled(self, folder: str, names: Sequence[str]) -> bool:
        """Answered requests were removed (by us, or by their children): forget them without a rescan."""
        served = self.served.by_folder.get(folder)
        return served is not None and self.pipeline.settled(served, names)

    async def _safety_rescan_loop(self) -> None:
        while not self._stop.is_set():
            await self._pause(SAFETY_RESCAN_S)
            if self._stop.is_set():
                return  # woken by the stop: no pass during the shutdown
            try:
                await self.rescan_all(safety=True)
            except Exception:
                log.error("a safety rescan failed; the next one runs as usual", exc_info=True)

    # -- draining -------------------------------------------------------------------------------

    async def rescan_all(self, safety: bool = False) -> None:
        """Every session at once: one session's long drain never holds another's (issue 34 finding 5).
        `safety`: the periodic pass for what a watch missed (`Drain.rescan`)."""
        await asyncio.gather(*(self.drain.rescan(served, safety) for served in list(self.served)))

    def _rescan_soon(self, served: ServedSession) -> None:
        """Rescan `served` in a task of its own, so a flood in one session (20,000 junk files) never
        delays another session's asks behind its drain (issue 34 finding 5); a change told while one
        runs is one more pass after it, never a pile of waiting rescans."""
        folder = served.inbox.folder_name
        running = self._rescans.get(folder)
        if running is not None and not running.done():
            self._rescan_again.add(folder)
            return
        self._rescans[folder] = self._spawn(self._rescan_while_told(served))

    async def _rescan_while_told(self, served: ServedSession) -> None:
        folder = served.inbox.folder_name
        while True:
            self._rescan_again.discard(folder)
            await self.rescan(served)
            if folder not in self._rescan_again or self._stop.is_set():
                return

    async def rescan(self, served: ServedSession) -> None:
        """Diff the inbox listing against the records (`core.serving.drain`); never raises."""
        await self.drain.rescan(served)

    def _emit(self, event: ServeEvent) -> None:
        for observer in self._observers:
            try:
                observer(event)
            except Exception:
                log.exception("observer failed on %s", event.kind)

    def _emit_all(self, events: Sequence[ServeEvent]) -> None:
        """A run of events, told each observer in one call (`subscribe`'s `run`)."""
        for run in self._runs:
            try:
                run(events)
            except Exception:
                log.exception("observer failed on a run of %d events", len(events))


def _each(observer: Observer) -> RunObserver:
    """An observer told a run of events one at a time (one's failure does not keep the rest from it)."""

    def run(events: Sequence[ServeEvent]) -> None:
        for event in events:
            try:
                observer(event)
            except Exception:
                log.exception("observer failed on %s", event.kind)

    return run
