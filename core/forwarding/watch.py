"""Change notification for the forwarding root: kernel inotify events (Linux), listing each folder on
a kqueue wake (macOS, `core.forwarding.kqueue`), or listing each folder every `POLL_S` as fallback.

The reference polls every 250 ms; a person at a side terminal should see an ask within
milliseconds. The watcher only says *which session folders changed*; the serving loop then rescans
those inboxes, so a missed or coalesced event can delay an ask by at most one safety rescan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from itertools import repeat
from operator import and_
from pathlib import Path

from core import platform
from core.clock import SYSTEM_CLOCK, Clock
from core.disk.tree import Anchor, UnsafeFolder
from core.forwarding import outbox
from core.forwarding.inotify import (
    DIRECTORY_EVENTS,
    FS_ENCODING,
    FS_ERRORS,
    HEADER,
    IN_CREATE,
    IN_DELETE,
    IN_DONT_FOLLOW,
    IN_IGNORED,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    MAX_EVENT_SIZE,
    READ_SIZE,
    Burst,
    Event,
    Inotify,
    InotifyUnavailable,
    WatchesExhausted,
    burst,
)
from core.forwarding.kqueue import FolderWake
from core.forwarding.outbox import Outboxes
from core.forwarding.poll import POLL_S, RESCAN_ALL, polled_changes

log = logging.getLogger("pi_authorizer.watch")

_UNSAFE_RETRY_S = 5.0
#: Events no file of a folder raises alone: each goes through `_SessionTree._handle`.
_SPECIAL = IN_Q_OVERFLOW | IN_IGNORED
#: A name made in a folder (created, linked or renamed in).
_CREATED = IN_CREATE | IN_MOVED_TO


Settled = Callable[[str, Sequence[str]], bool]
"""`settled(folder, names)`, told that `requests/<name>` of each was removed (a read's removals of one
folder, at once): True when the core had answered each (and now forgets them), so the removals are no
news and need no rescan."""


def nothing_settled(folder: str, names: Sequence[str]) -> bool:
    return False


Foreign = Callable[[str, int, str], None]
"""`foreign(folder, pid, target)`: a temp file of another process (pid) appeared in `responses/` of a
served inbox, written for the name `target` (the answer its rename replaces): another server is
writing answers there."""


def no_foreign(folder: str, pid: int, target: str) -> None:
    return None


Wanted = Callable[[str], bool]
"""`wanted(folder)`: whether `sessions/<folder>` is an inbox served (only those are watched)."""


def every_folder(folder: str) -> bool:
    return True


def decoded(raws: list[bytes]) -> list[str]:
    """File names as the kernel gave them, decoded as `os.fsdecode` decodes each, in one call: joined by
    a byte no name holds (`/`), which no multi-byte sequence of the encoding contains either
    (`tests/core/test_inotify_burst.py` compares them)."""
    return b"/".join(raws).decode(FS_ENCODING, FS_ERRORS).split("/")


class _SessionTree:
    """inotify watches on `sessions/`, each `sessions/<folder>/` and each `.../requests/`; each
    `.../responses/` on an instance of its own (`core.forwarding.outbox`: this node's own answers linked
    there are read there, not here, and a trip reads them too before it looks for responses).

    Each folder is opened by descriptor from the root (never through a link) and watched through
    `/proc/self/fd/<fd>`, so a linked session folder never makes a foreign folder watched.
    """

    def __init__(
        self,
        sessions_dir: Path,
        tree: Anchor,
        settled: Settled = nothing_settled,
        wanted: Wanted = every_folder,
        foreign: Foreign = no_foreign,
        fault: Callable[[str], None] = lambda checkpoint: None,
    ) -> None:
        self.sessions_dir = sessions_dir
        self.foreign = foreign
        self.tree = tree
        self.settled = settled
        self.wanted = wanted
        #: Session folders seen and not watched (no inbox served there): watched once one is.
        self.unwatched: set[str] = set()
        self.inboxes: set[int] = set()
        self.ino = Inotify(fault)
        self.folder_of: dict[int, str | None] = {}
        self.changed: set[str] = set()
        self.rescan_all = False
        self.ready = asyncio.Event()
        #: The outbox's reads seen at the last read of the tree, and the stream's reads since that
        #: left it unread (`on_readable`).
        self._outbox_reads, self._outbox_skips = 0, 0
        try:
            #: The watches of served inboxes' `responses/`: another writer's temp names are seen there.
            self.outbox = Outboxes(foreign, self._overflowed, fault)
        except BaseException:
            self.ino.close()
            raise

    @property
    def descriptors(self) -> tuple[int, int]:
        """The inotify instances read on the loop (`on_readable` reads both)."""
        return self.ino.fd, self.outbox.fd

    def _overflowed(self) -> None:
        """Events of `responses/` were lost (another writer's temp may have been among them)."""
        self.rescan_all = True
        self.ready.set()

    def start(self) -> None:
        try:
            with self.tree.folder(("sessions",), create=True) as fd:
                folders = os.listdir(fd)
                self._watch_fd(fd, None)
        except UnsafeFolder as exc:  # serving reports it; the safety rescan still runs
            log.warning("not watching the sessions folder: %s", exc)
            return
        for folder in folders:
            self._watch_folder(folder)
        self.rescan_all = True
        self.ready.set()

    def _watch(self, parts: tuple[str, ...], folder: str, inbox: bool = False) -> None:
        try:
            with self.tree.folder(parts) as fd:
                self._watch_fd(fd, folder, inbox)
        except (FileNotFoundError, UnsafeFolder):
            return  # not there (yet), or a link: serving reports it, nothing is watched through it

    def _watch_fd(self, fd: int, folder: str | None, inbox: bool = False) -> None:
        wd = self.ino.add_watch(platform.proc_fd_path(fd), DIRECTORY_EVENTS & ~IN_DONT_FOLLOW)
        if wd is not None:
            self.folder_of[wd] = folder
            if inbox:
                self.inboxes.add(wd)
            else:
                self.inboxes.discard(wd)

    def _watch_folder(self, folder: str) -> None:
        """Two watches for a served inbox's folder; none for a folder nobody serves (a child may make
        thousands: watching them would spend the user's inotify watches)."""
        if not self.wanted(folder):
            self.unwatched.add(folder)
            return
        self.unwatched.discard(folder)
        self._watch(("sessions", folder), folder)
        self._watch(("sessions", folder, "requests"), folder, inbox=True)
        self._watch_outbox(folder)
        # Whatever arrived before the watch existed is found by the rescan this triggers.
        self.changed.add(folder)

    def on_readable(self) -> int:
        """Read the events waiting (a full read is followed by another, up to `READS_AT_ONCE`: a burst
        gathered for a while may hold more than one read takes, and a flood a child keeps up never
        holds the loop); how many bytes of them there were. `responses/`'s are read too, but not
        while a burst's stream runs (`BULK_BYTES` of `requests/`'s events at a read): its trips read
        them before they look for responses, and another writer's temp seen there is handed here;
        unless no trip read them in `OUTBOX_SKIPS` such reads (a child's flood of temps, no news, runs
        no trip: another server's temp is still told, review2, 2)."""
        total = 0
        for _ in range(READS_AT_ONCE):
            try:
                data = self.ino.read_raw()
            except OSError as exc:
                log.warning("reading inotify events failed: %s", exc)
                self.rescan_all = True
                data = b""
            self._parse(data)
            total += len(data)
            if len(data) < READ_SIZE - MAX_EVENT_SIZE:
                break
        if self.outbox.reads != self._outbox_reads:  # a trip read it since: it is read, and its news told
            self._outbox_skips = 0
        if total < BULK_BYTES or self._outbox_skips >= OUTBOX_SKIPS:
            total += self.outbox.read()
            self._outbox_skips = 0
        else:
            self._outbox_skips += 1
        self._outbox_reads = self.outbox.reads
        if self.changed or self.rescan_all:
            self.ready.set()
        return total

    def _parse(self, data: bytes) -> None:
        if (found := burst(data)) is None or not self._parse_burst(found):
            self._parse_each(data)

    def _parse_burst(self, read: Burst) -> bool:
        """A read whose events are all of one served inbox's request files (`.json`, none special: a
        burst's renames in and removals), told without a Python step per event, as `_parse_each` tells
        them; False, with nothing told, for any other read."""
        wd, masks = read.wd, read.masks
        if wd not in self.inboxes or (folder := self.folder_of.get(wd)) is None:
            return False
        if any(map(and_, masks, repeat(_SPECIAL))) or not read.all_end_with(b".json"):
            return False
        removed = read.names(map(and_, masks, repeat(IN_DELETE | IN_MOVED_FROM)))
        if len(removed) < len(masks):  # a request made (renamed in), or its file changed
            self.changed.add(folder)
        if removed and not self.settled(folder, decoded(removed)):
            self.changed.add(folder)
        return True

    def _parse_each(self, data: bytes) -> None:
        # A burst's events in bulk: a request file renamed in or removed, two per ask, are told apart
        # here as the kernel wrote them, without an `Event` each (`_handle` has the rest, in order); a
        # read's removals are looked up once per folder, after (an answered request's is no news), and
        # their names decoded at once (`decoded`). A name made (or its file changed) in an inbox
        # already to be rescanned says nothing more; one made in another is news when it is a request's
        # (`.json`) or the inbox's own (no name), as `_handle` would say.
        folder_of, inboxes, changed = self.folder_of, self.inboxes, self.changed
        removed: dict[str, list[bytes]] = {}
        offset, last, size, unpack = 0, len(data) - HEADER.size, HEADER.size, HEADER.unpack_from
        gone = IN_DELETE | IN_MOVED_FROM
        while offset <= last:
            wd, mask, _cookie, length = unpack(data, offset)
            start = offset + size
            offset = start + length
            if wd in inboxes and not mask & _SPECIAL and (folder := folder_of.get(wd)) is not None:
                if not mask & gone:
                    if folder in changed:
                        continue
                    raw = data[start:offset].rstrip(b"\0")
                    if raw.endswith(b".json") or not raw:
                        changed.add(folder)
                    continue
                raw = data[start:offset].rstrip(b"\0")
                if raw.endswith(b".json"):
                    if (names := removed.get(folder)) is None:
                        removed[folder] = [raw]
                    else:
                        names.append(raw)
                    continue
                if raw:  # a child's temp file renamed away or removed: no news
                    continue
            else:
                raw = data[start:offset].rstrip(b"\0")
            self._handle(Event(wd, mask, raw.decode(FS_ENCODING, FS_ERRORS)))
        for folder, raws in removed.items():
            if not self.settled(folder, decoded(raws)):
                changed.add(folder)

    def _handle(self, event: Event) -> None:
        if event.mask & IN_Q_OVERFLOW:
            self.rescan_all = True
            return
        if event.wd not in self.folder_of:
            return
        folder = self.folder_of[event.wd]
        if event.mask & IN_IGNORED:
            del self.folder_of[event.wd]
            self.inboxes.discard(event.wd)
            if folder is None:  # `sessions/` itself went away: recreate and start over
                self.rescan_all = True
                with contextlib.suppress(OSError):
                    self.start()
            return
        if folder is None:
            if event.name:
                self._watch_folder(event.name)
            return
        if event.wd in self.inboxes and self._no_news(folder, event):
            return
        if event.name == "requests":
            self._watch(("sessions", folder, "requests"), folder, inbox=True)
        if event.name == "responses":
            self._watch_outbox(folder)
        self.changed.add(folder)

    def _no_news(self, folder: str, event: Event) -> bool:
        """A child's temp file being written, or an answered request being removed: no rescan.

        A burst would otherwise rescan a folder of thousands of names once per file event.
        """
        if not event.name:  # the inbox itself (moved, deleted, its mode changed): rescan
            return False
        if not event.name.endswith(".json"):
            return True
        return bool(event.mask & (IN_DELETE | IN_MOVED_FROM)) and self.settled(folder, (event.name,))

    def _watch_outbox(self, folder: str) -> None:
        try:
            with self.tree.folder(("sessions", folder, "responses")) as fd:
                self.outbox.watch(folder, fd, platform.proc_fd_path(fd))
        except (FileNotFoundError, UnsafeFolder):
            return

    def sync(self) -> None:
        """Watch the folders of inboxes served since they were seen (a session taken later)."""
        for folder in [f for f in self.unwatched if self.wanted(f)]:
            self._watch_folder(folder)
        if self.changed:
            self.ready.set()

    def take(self) -> set[str]:
        self.ready.clear()
        if self.rescan_all:
            self.rescan_all = False
            self.changed.clear()
            return set(RESCAN_ALL)
        taken, self.changed = self.changed, set()
        return taken

    def close(self) -> None:
        outbox.unregister(self.outbox)
        self.outbox.close()
        self.ino.close()


#: Reads of a burst's stream that may leave `responses/`'s events unread while no trip reads them
#: (`_SessionTree.on_readable`): another server's temp is told within this many gathers.
OUTBOX_SKIPS = 4

#: How often the watcher looks for inboxes served since (their folders then get their watches); the
#: safety rescan finds their asks meanwhile.
SYNC_S = 1.0
#: Events read this soon after the last read are a stream (a burst: a rename in, a link and a removal
#: per ask): the next read waits this long, so the loop wakes once per stretch, not every few events.
GATHER_S = 0.002
#: While a burst goes on (a read finds `BULK_BYTES` of events or more), each wait is twice the one
#: before, up to this: a burst of 10,000 asks is read in ~100 stretches, not ~1,000 (each a wake-up
#: of the loop, two `epoll_ctl` and a timer). Asks one after the other (a few events a read) never
#: wait longer than `GATHER_S`, and the first read after a quiet moment is at once.
GATHER_MAX_S = 0.016
#: A read this large is a burst's (~30 events; one ask's are three).
BULK_BYTES = 2048
#: Full reads followed by another in one turn of the loop (~1 MiB of events: a gathered burst's 16 ms
#: of them many times over). Whatever is left is read on the loop's next turn (the descriptor is
#: watched level-triggered), so a flood of events a child keeps up never holds the loop (review, F1).
READS_AT_ONCE = 16


class _Reading:
    """The inotify descriptor read on the event loop: at once while events are rare (a single ask pays
    no wait), once per `GATHER_S` while they stream in, longer while a burst lasts (`GATHER_MAX_S`);
    never while the consumer rescans (`paused`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, watched: _SessionTree) -> None:
        self.loop, self.watched = loop, watched
        self.paused = self.gathering = self.closed = False
        self.on = False
        self.last = float("-inf")
        self.wait = GATHER_S

    def readable(self) -> None:
        size = self.watched.on_readable()
        bulk = size >= BULK_BYTES
        if not size:  # nothing came (a look after a rescan): no stream, nothing to gather
            self.wait = GATHER_S
            return
        now = self.loop.time()
        if (bulk or now - self.last < GATHER_S) and not self.gathering:
            self.gathering = True
            self._sync()
            self.loop.call_later(self.wait if bulk else GATHER_S, self._gathered)
        self.wait = min(self.wait * 2, GATHER_MAX_S) if bulk else GATHER_S
        self.last = now

    def _gathered(self) -> None:
        self.gathering = False
        self._sync()
        if self.on:
            self.readable()  # what queued meanwhile, at once

    def pause(self, paused: bool) -> None:
        self.paused = paused
        self._sync()

    def close(self) -> None:
        self.closed = True
        self._sync()

    def _sync(self) -> None:
        wanted = not (self.paused or self.gathering or self.closed)
        if wanted and not self.on:
            for fd in self.watched.descriptors:
                self.loop.add_reader(fd, self.readable)
        elif self.on and not wanted:
            for fd in self.watched.descriptors:
                self.loop.remove_reader(fd)
        self.on = wanted


async def _inotify_changes(
    sessions_dir: Path,
    tree: Anchor,
    stop: asyncio.Event,
    settled: Settled,
    wanted: Wanted = every_folder,
    foreign: Foreign = no_foreign,
    fault: Callable[[str], None] = lambda checkpoint: None,
) -> AsyncIterator[set[str]]:
    """While the consumer rescans what a yield named, the events wait in the kernel and are read in
    bulk after: a burst's events (a rename in and a removal per request) would otherwise wake the loop
    every few events during that rescan, and they only say to rescan again once it ends. An overflow
    meanwhile means "rescan everything"; a removal not read yet is noted by that rescan instead."""
    watched = _SessionTree(sessions_dir, tree, settled, wanted, foreign, fault)
    loop = asyncio.get_running_loop()
    reading = _Reading(loop, watched)
    reading.pause(False)
    try:
        outbox.register(watched.outbox, _handed_to(loop))
        watched.start()
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                ready = asyncio.ensure_future(watched.ready.wait())
                await asyncio.wait({ready, stopping}, timeout=SYNC_S, return_when=asyncio.FIRST_COMPLETED)
                ready.cancel()
                watched.sync()
                if not watched.ready.is_set():
                    continue
                if not stop.is_set():
                    taken = watched.take()
                    reading.pause(True)
                    try:
                        yield taken
                    finally:
                        reading.pause(False)
                    if reading.on:  # what queued meanwhile: at once, unless a stream is being gathered
                        reading.readable()
        finally:
            stopping.cancel()
    finally:
        reading.close()
        watched.close()


def _handed_to(loop: asyncio.AbstractEventLoop) -> outbox.Tell:
    """How a trip off the loop hands the watcher what it read (another writer's temp, an overflow)."""

    def tell(call: Callable[..., object], *args: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing is watched now
            loop.call_soon_threadsafe(call, *args)

    return tell


class ExhaustedReport:
    """Says (log) that the user's inotify watches are used up, with the limit, once for a node: its
    watcher may start again (and meet the same refusal) while the fault stays the user's."""

    def __init__(self) -> None:
        self.said = False

    def __call__(self, exc: WatchesExhausted) -> None:
        if self.said:
            log.info("inotify watches still used up; polling the served inboxes")
            return
        self.said = True
        log.error("%s: polling the served inboxes every %.2f s instead (only those: nothing else is "
                  "listed); raise the limit or end what holds the watches", exc.strerror, POLL_S)


async def _sessions_folder_ready(tree: Anchor, stop: asyncio.Event, clock: Clock) -> None:
    """Create `sessions/` from the root down; while it is a link, wait (serving reports it) and retry."""
    while not stop.is_set():
        try:
            with tree.folder(("sessions",), create=True):
                return
        except UnsafeFolder as exc:
            log.warning("not watching the sessions folder: %s", exc)
        await clock.wait(stop, _UNSAFE_RETRY_S)


async def watch_session_folders(
    forwarding_root: Path,
    stop: asyncio.Event,
    force_polling: bool = False,
    tree: Anchor | None = None,
    settled: Settled = nothing_settled,
    clock: Clock = SYSTEM_CLOCK,
    wanted: Wanted = every_folder,
    foreign: Foreign = no_foreign,
    fault: Callable[[str], None] = lambda checkpoint: None,
    exhausted: Callable[[WatchesExhausted], None] | None = None,
) -> AsyncIterator[set[str]]:
    """Yield the `sessions/<folder>` names touched since the last yield, until `stop`.

    An empty set means "rescan everything" (start, overflow, or the watch was restarted). The retry
    while `sessions/` is a link and the fallback's poll interval are waited on `clock`.
    """
    sessions_dir = forwarding_root / "sessions"
    tree = tree or Anchor(forwarding_root, "forwarding root")
    await _sessions_folder_ready(tree, stop, clock)
    if stop.is_set():
        return
    backend = "polling" if force_polling else platform.watch_backend()
    if backend == "inotify":
        try:
            async for folders in _inotify_changes(sessions_dir, tree, stop, settled, wanted, foreign, fault):
                yield folders
            return
        except WatchesExhausted as exc:
            (exhausted or ExhaustedReport())(exc)
        except InotifyUnavailable as exc:
            log.warning("inotify is unavailable (%s); polling every %.2f s instead", exc, POLL_S)
    wake = None
    if backend == "kqueue":
        try:
            wake = FolderWake(tree)
        except OSError as exc:
            log.warning("kqueue is unavailable (%s); polling every %.2f s instead", exc, POLL_S)
    try:
        async for folders in polled_changes(tree, stop, clock, wanted, foreign, wake):
            yield folders
    finally:
        if wake is not None:
            wake.close()
