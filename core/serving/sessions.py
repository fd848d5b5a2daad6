"""The sessions a core serves: each one's lock, heartbeat, inbox and the records of its request files.

A front end sees them only through `ServedSessions` (`ServingCore.served`): a snapshot for display,
the other inboxes under the root, and the release a forced exit's watchdog may call from its own
thread. The records themselves stay the serving loop's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Protocol

from core import platform
from core.disk.entries import leftover_temp_files, remove
from core.disk.paths import normalize_session_id
from core.disk.tree import Anchor, UnsafeFolder
from core.forwarding.inbox import SessionInbox, display_name
from core.forwarding.liveness import (
    HEARTBEAT_INTERVAL_S,
    Heartbeat,
    SessionLock,
    live_foreign_server,
    not_a_server,
    pid_alive,
)
from core.forwarding.survey import InboxStatus, survey_inboxes
from core.seams import Seams
from core.serving.records import UNDECIDED, AskRecords
from core.text import log_safe
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent

log = logging.getLogger("pi_authorizer.serve")

#: Response names remembered as another server's while it lasts (its every answer is still reported).
MAX_CONTESTED = 10_000
#: How long a process seen writing answers into an inbox (the 20.7.3 in-pi server keeps no heartbeat)
#: is believed to serve it after the last temp file seen.
WRITER_BELIEVED_S = 30.0
#: A temp file of a real writer lives an instant: one still there and empty after this is a planted
#: file, not a server writing.
EMPTY_TEMP_S = 1.0


@dataclass
class ServedSession:
    inbox: SessionInbox
    lock: SessionLock
    heartbeat: Heartbeat
    records: AskRecords = field(init=False)
    """One state record per request file being served (`core.serving.records`)."""
    scan_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    unservable: str | None = None
    #: Another live server answers this inbox (its heartbeat names a live pid that is not this one):
    #: this node neither beats nor answers for the session while it lasts.
    foreign: str | None = None
    #: A live process not this one seen writing temp files in this inbox's `responses/`.
    foreign_writer: int | None = None
    #: When (monotonic) `foreign_writer` was last seen writing one: believed only while that is recent.
    foreign_writer_seen: float = 0.0
    #: Temp files of another writer noted so far: a look for another server begun before the latest
    #: (`Sessions.heartbeat_loop`) is stale, and never clears what that note found.
    foreign_notes: int = 0
    #: Response names another server wrote (or is writing) answers under while it lasts: an answer of
    #: this node's under one of them is never taken as the one its child read.
    contested: dict[str, int] = field(default_factory=dict)
    #: The names said contested (log line, event) while that server lasts: each is said once.
    contested_said: set[str] = field(default_factory=set)
    #: Names this node answered lately, newest last (bounded): another server's answer under one of them
    #: contests this node's; under a name this node never judged it is none of this node's business.
    #: (A plain dict keeps its order: a burst's thousands are noted and let go at twice the speed of
    #: an `OrderedDict`'s.)
    answered: dict[str, None] = field(default_factory=dict)
    #: Names of asks decided at once whose answers the publisher is settling (`core.serving.at_once`):
    #: held as a record holds its name (no rescan takes their files), until their report.
    settling: set[str] = field(default_factory=set)
    problems: dict[str, ServeEvent] = field(default_factory=dict)
    """Refused folders by part (`inbox`, `heartbeat`): the `unsafe_folder` event that reported each."""

    def __post_init__(self) -> None:
        self.records = AskRecords(self.inbox.session_id)

    def note_answered(self, name: str) -> None:
        """This node's answer under `name` was placed (remembered for `judged`, bounded)."""
        self.note_answered_all([name])

    def note_answered_all(self, names: list[str]) -> None:
        """`note_answered` for a batch's answers, in their order."""
        answered = self.answered
        for name in answered.keys() & names:  # answered lately under the same name: newest again
            del answered[name]
        answered.update(dict.fromkeys(names))
        if len(answered) > MAX_CONTESTED:  # the oldest let go (a burst's run of them, in C)
            deque(map(answered.__delitem__, list(islice(answered, len(answered) - MAX_CONTESTED))), maxlen=0)

    def judged(self, name: str) -> bool:
        """Whether this node serves the request `name` now (its answer settling at once included), or
        answered it lately."""
        return self.records.get(name) is not None or name in self.settling or name in self.answered

class ServedSessions(Protocol):
    """All a front end may know and do about the sessions a core serves (no lock, heartbeat or record)."""

    @property
    def root(self) -> Path: ...

    def __len__(self) -> int: ...

    def __contains__(self, session_id: object) -> bool: ...

    def statuses(self) -> list[InboxStatus]:
        """A snapshot of each served session, for display (`waiting`: requests not answered yet;
        `other_server`: the evidence that another server answers it, while this node does not)."""

    def others(self) -> list[InboxStatus]:
        """Every other inbox under the root, and who (if anyone) serves it."""

    def release(self, wait_s: float | None = None) -> None:
        """Heartbeats removed, locks released, from any thread; never raises."""

    def take_over(self, session_id: str) -> str:
        """The person's deliberate key: serve a session another server seems to answer, writing over its
        evidence; returns what was overruled, in words. Raises `KeyError` when not served here."""


class Sessions:
    """The sessions one core serves, by id and by folder: taking one (lock, heartbeat), beating for
    them, and saying (once, in the log and as an event) when one cannot be served and why."""

    def __init__(
        self,
        root: Path,
        state_dir: Path,
        tree: Anchor,
        state_tree: Anchor,
        seams: Seams,
        emit: Callable[[ServeEvent], None],
    ) -> None:
        self.root, self.state_dir, self.tree, self.state_tree = root, state_dir, tree, state_tree
        self.writer, self.clock, self.emit = seams.disk, seams.clock, emit
        self.by_id: dict[str, ServedSession] = {}
        self.by_folder: dict[str, ServedSession] = {}
        # Heartbeats get their own thread: a busy default executor never delays a beat.
        self._beats = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="heartbeat")
        # Held while a heartbeat is written or the sessions are released: once released (from the
        # loop at shutdown, or from a watchdog thread), no beat writes a heartbeat again.
        self._guard = threading.Lock()
        self._released = False

    # -- what a front end sees (`ServedSessions`) --------------------------------------------------

    def __len__(self) -> int:
        return len(self.by_id)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self.by_id

    def __iter__(self) -> Iterator[ServedSession]:
        """The sessions served (a copy: one may be taken while a caller goes through them)."""
        return iter(list(self.by_id.values()))

    def __getitem__(self, session_id: str) -> ServedSession:
        return self.by_id[session_id]

    def statuses(self) -> list[InboxStatus]:
        return [InboxStatus(served.inbox.folder_name, session_id, "alive", os.getpid(),
                            waiting=sum(1 for record in served.records if record.state in UNDECIDED),
                            problem="; ".join(str(e.reason) for e in served.problems.values()) or None,
                            other_server=served.foreign)
                for session_id, served in list(self.by_id.items())]

    def others(self) -> list[InboxStatus]:
        return [status for status in survey_inboxes(self.root, self.tree, self.clock)
                if status.session_id not in self.by_id]

    def add(self, raw_id: str) -> tuple[ServedSession, bool]:
        """The session, and whether it was taken just now. Raises `SessionHeld` if served elsewhere."""
        session_id = normalize_session_id(raw_id)
        if session_id in self.by_id:
            return self.by_id[session_id], False
        lock = SessionLock(self.state_dir, session_id, self.state_tree)
        lock.acquire()
        foreign = live_foreign_server(self.root, session_id, self.tree)
        inbox = SessionInbox(self.root, session_id, self.tree, self.writer)
        _remove_leftover_temps(self.tree, ("sessions", inbox.folder_name, "responses"), ("serving",))
        heartbeat = Heartbeat(self.root, session_id, self.tree, writer=self.writer)
        served = ServedSession(inbox=inbox, lock=lock, heartbeat=heartbeat)
        if foreign is not None and foreign.pid != lock.previous_pid:
            # A live server that is not the authorizer whose lock we just took over (a pi parent): the
            # session is taken, said once, and not answered while that server lasts (the heartbeat
            # loop looks every second), never given up for good on the word of one file.
            self._foreign(served, foreign.pid, "its heartbeat in serving/")
        else:
            self._beat(served)
        self.by_id[session_id] = served
        self.by_folder[inbox.folder_name] = served
        log.info("serving session %s (inbox %s)", log_safe(session_id), inbox.requests_dir)
        return served, True

    def release(self, wait_s: float | None = None) -> None:
        """Heartbeats removed, locks released: the sessions are free for another authorizer. Once, from
        any thread: at shutdown on the loop, or from a forced exit's watchdog while the loop is stuck.

        No beat starts again; a beat in flight is waited for (at most `wait_s`, if given), since
        cancelling the heartbeat loop does not stop a beat already running, which would write the file
        again once removed."""
        self._beats.shutdown(wait=False, cancel_futures=True)
        held = self._guard.acquire(timeout=-1 if wait_s is None else wait_s)
        try:
            if not self._released:
                self._released = True
                for served in list(self.by_id.values()):
                    with contextlib.suppress(Exception):
                        served.heartbeat.clear()
                    with contextlib.suppress(Exception):
                        served.lock.release()
        finally:
            if held:
                self._guard.release()

    def _guarded(self, beat: Callable[[], None]) -> None:
        """A heartbeat write (or removal), never after the sessions were released."""
        with self._guard:
            if not self._released:
                beat()

    async def heartbeat_loop(self, stop: asyncio.Event) -> None:
        """Beat every second in a thread of its own; a session that cannot be served is not beaten
        for, and its heartbeat is removed, so no child or authorizer takes it for served."""
        loop = asyncio.get_running_loop()
        while not stop.is_set() and not self._released:
            for served in list(self.by_id.values()):
                notes = served.foreign_notes
                found = await loop.run_in_executor(self._beats, self.other_server, served)
                if found is None and served.foreign_notes != notes:
                    continue  # another writer was noted while it looked: the next look decides
                if self.apply_foreign(served, found):
                    continue  # another server answers it: its heartbeat is left alone
                beat = served.heartbeat.clear if served.unservable else served.heartbeat.beat
                try:
                    await loop.run_in_executor(self._beats, self._guarded, beat)
                except UnsafeFolder as exc:
                    self._beat_refused(served, exc)
                    continue
                except Exception as exc:
                    waiting = " (waiting for disk)" if isinstance(exc, OSError) else ""
                    session = log_safe(served.inbox.session_id)
                    log.warning("heartbeat for %s failed%s: %s", session, waiting, exc)
                    continue
                if not served.unservable:
                    self.clear_unsafe(served, "heartbeat")
            await self.clock.wait(stop, HEARTBEAT_INTERVAL_S)

    def other_server(self, served: ServedSession) -> tuple[int, str] | None:
        """(pid, how it was seen) of another live server answering this session now, off the loop: its
        fresh heartbeat names a live pid not this process's, or a live process not this one was seen
        writing temp files in its `responses/` (`note_foreign_writer`; the 20.7.3 in-pi server
        publishes no heartbeat)."""
        try:
            other = served.heartbeat.foreign()
        except OSError:
            other = None
        if other is not None:
            return other.pid, "its heartbeat in serving/"
        writer = served.foreign_writer
        if writer is None:
            return None
        since = self.clock.monotonic() - served.foreign_writer_seen
        if since <= WRITER_BELIEVED_S and not_a_server(writer) is None and \
                not (since > EMPTY_TEMP_S and self._only_empty_temps(served, writer)):
            return writer, "its temp files in responses/"
        return None

    def _only_empty_temps(self, served: ServedSession, pid: int) -> bool:
        """Whether `pid`'s temp files in the inbox's `responses/` are all still there and empty."""
        try:
            with self.tree.folder(("sessions", served.inbox.folder_name, "responses")) as fd:
                sizes = [os.stat(name, dir_fd=fd, follow_symlinks=False).st_size
                         for name, writer in leftover_temp_files(fd) if writer == pid]
        except OSError:
            return False
        return bool(sizes) and not any(sizes)

    def take_over(self, session_id: str) -> str:
        served = self.by_id[session_id]
        found = self.other_server(served)
        pid = found[0] if found is not None else None
        served.heartbeat.overruled = pid
        served.foreign_writer = None
        words = f"pid {pid} ({found[1]})" if found is not None else "no other server seen now"
        log.warning("session %s taken over by the person's key from %s: this node answers its inbox",
                    log_safe(session_id), words)
        self.apply_foreign(served, None)
        self._beat(served)
        return words

    def apply_foreign(self, served: ServedSession, found: tuple[int, str] | None) -> bool:
        """On the loop: whether another server answers the session. Said once when it starts (log,
        `not_serving` event naming it) and once when it ends (`serving_again`); while it lasts this node
        neither beats nor answers the inbox (`Drain`), so two servers never race one child."""
        if found is not None:
            self._foreign(served, *found)
            return True
        served.foreign_writer = None
        served.contested.clear()
        served.contested_said.clear()
        if served.foreign is not None:
            served.foreign = None
            session = served.inbox.session_id
            log.info("the other server of session %s is gone: serving it again", log_safe(session))
            self.emit(ServeEvent("serving_again", AskKey(session, ""), self.clock.wall()))
        return False

    def note_foreign_writer(self, served: ServedSession, pid: int, target: str) -> None:
        """A temp file of process `pid` appeared in this inbox's `responses/` (the watcher saw it), for
        the answer `target`: its rename replaces any answer this node placed there, so that ask is
        `contested` (the history never claims this node's answer was the one delivered), when this node
        judged it: the other server's answers to asks this node never saw are its own business."""
        if pid == os.getpid() or pid == served.heartbeat.overruled or not_a_server(pid) is not None:
            return  # an empty temp file named for pid 1, or for a dead or another user's process
        served.foreign_writer = pid
        served.foreign_writer_seen = self.clock.monotonic()
        served.foreign_notes += 1
        self._foreign(served, pid, "its temp files in responses/")
        if not served.judged(target):
            return
        if len(served.contested) < MAX_CONTESTED:
            served.contested[target] = pid
        self.contest(served, target, pid)

    def contest(self, served: ServedSession, name: str, pid: int | None) -> None:
        """Say (log, `contested` event: the history's row, the app) that another server answered the
        request `name` too, so whatever this node answered may not be what its child read. Said once
        per name while that server lasts (its temp files, a rescan and the publisher may each see it)."""
        if name in served.contested_said or len(served.contested_said) >= MAX_CONTESTED:
            return
        served.contested_said.add(name)
        session = served.inbox.session_id
        who = "another server" if pid is None else f"another server (pid {pid})"
        reason = (f"{who} wrote its own answer to this request; the child may have read that answer, "
                  "not this node's")
        log.error("session=%s request=%s contested: %s", log_safe(session), log_safe(display_name(name)),
                  reason)
        self.emit(ServeEvent("contested", AskKey(session, name), self.clock.wall(), reason=reason))

    def _foreign(self, served: ServedSession, pid: int, seen: str) -> None:
        if served.foreign is not None:
            return
        session = served.inbox.session_id
        command = platform.process_command(pid)
        running = f", running {command!r}" if command else ""
        reason = (f"another server answers session {session} (pid {pid}, {seen}{running}); this node "
                  "stops answering this inbox while it lasts")
        served.foreign = reason
        log.error("another server answers session %s (pid %d, %s%s): this node stops answering it while "
                  "that server runs, and serves it again once it is gone (S, then T, takes it over)",
                  log_safe(session), pid, seen, log_safe(running, 200))
        self.emit(ServeEvent("not_serving", AskKey(session, ""), self.clock.wall(), reason=reason))

    def _beat(self, served: ServedSession) -> None:
        try:
            self._guarded(served.heartbeat.beat)
        except UnsafeFolder as exc:
            self._beat_refused(served, exc)
            return
        except OSError as exc:  # a full or failing disk: the heartbeat loop keeps trying every second
            log.warning("heartbeat for %s failed (waiting for disk): %s; retried every %.0fs",
                        log_safe(served.inbox.session_id), exc, HEARTBEAT_INTERVAL_S)
            return
        self.clear_unsafe(served, "heartbeat")

    def _beat_refused(self, served: ServedSession, exc: UnsafeFolder) -> None:
        self.report_unsafe(served, "heartbeat", exc, "no serving heartbeat is published")

    def report_unsafe(self, served: ServedSession, part: str, exc: UnsafeFolder, consequence: str) -> None:
        """A folder of the session tree is a link (or not a folder): said once in the log and to observers."""
        reason = f"{exc}: {consequence} until it is removed"
        known = served.problems.get(part)
        if known is not None and known.reason == reason:
            return
        key = AskKey(served.inbox.session_id, exc.where)
        event = ServeEvent("unsafe_folder", key, self.clock.wall(), reason=reason)
        served.problems[part] = event
        self.emit(event)
        log.warning("session=%s %s", log_safe(served.inbox.session_id), log_safe(reason, 400))

    def clear_unsafe(self, served: ServedSession, part: str) -> None:
        if served.problems.pop(part, None) is not None:
            log.info("session=%s %s folders are sound again", log_safe(served.inbox.session_id), part)

    def set_unservable(self, served: ServedSession, reason: str | None) -> None:
        """Say (log, event) when a session cannot be served at all, and when it can again."""
        if reason == served.unservable:
            return
        key = AskKey(served.inbox.session_id, "")
        previous, served.unservable = served.unservable, reason
        if reason is not None:
            log.error("NOT SERVING session %s: %s", log_safe(served.inbox.session_id), log_safe(reason, 300))
            self.emit(ServeEvent("not_serving", key, self.clock.wall(), reason=reason))
        elif previous is not None:
            log.info("serving session %s again", log_safe(served.inbox.session_id))
            self.emit(ServeEvent("serving_again", key, self.clock.wall()))


def _remove_leftover_temps(tree: Anchor, *folders: tuple[str, ...]) -> None:
    """Temp files of a writer that was killed (`kill -9`) mid-write: never linked, so never seen
    by a child; removed (by descriptor, never through a link) when a session is taken so they do
    not pile up."""
    for parts in folders:
        try:
            with tree.folder(parts) as fd:
                for name, pid in leftover_temp_files(fd):
                    if not pid_alive(pid):
                        with contextlib.suppress(OSError):
                            remove(fd, name)
                            log.info("removed a leftover temp file %s/%s", "/".join(parts),
                                     log_safe(display_name(name), 300))
        except OSError:
            continue
