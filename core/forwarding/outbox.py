"""The `responses/` folders of served inboxes, watched on an inotify instance of their own: another
writer's temp file seen there (another server answering), and which names each folder holds, so a trip
looks for the responses of the ids it read without a system call per id or a listing of thousands.

What a folder holds (`Outboxes.existing`) is vouched for only when it can be exactly: the folder's watch
is on that very folder (device and inode), a listing of it was taken once its watch existed, and every
event the kernel queued since has been read (the look reads them first: the kernel queues a name's
creation, link or rename in before the call that made it returns). The names listed then and created
since are a superset of what the folder holds; each of them asked for is looked at again (`os.access`),
so a response removed since is never taken as there. An overflow, a watch gone, a view grown past
`VIEW_MAX` or a folder that is not the one watched vouches for nothing: the caller lists or looks as
before. Measured (issue 37, sixth pass, `docs/design/serving-speed.md`): a look per id cost a burst
~3.5 µs per ask, a listing per trip grows with the folder.

Read by whichever thread comes first, under one lock: the event loop as the watcher's reads go
(`core.forwarding.watch`), a trip off the loop before it looks. What a read finds for the loop (another
writer's temp, an overflow) is handed to it with `tell`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection
from itertools import repeat
from operator import and_
from typing import Any

from core import platform
from core.disk.entries import temp_target, temp_writer
from core.forwarding.inotify import (
    FS_ENCODING,
    FS_ERRORS,
    HEADER,
    IN_CREATE,
    IN_IGNORED,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    MAX_EVENT_SIZE,
    READ_SIZE,
    Inotify,
    burst,
)

#: What a served inbox's `responses/` is watched for: a name created, linked or renamed in.
OUTBOX_EVENTS = IN_CREATE | IN_MOVED_TO
#: Names a folder's view holds at most (listed, and created since; a child removes the responses it
#: read, unseen here), or twice what its listing found if more: past this it is dropped, and the next
#: look lists the folder again (a listing per that many names created, at most).
VIEW_MAX = 1 << 16
#: Full reads a look takes at most before it gives up vouching (a flood of names kept up by someone).
READS_AT_MOST = 64
#: Full reads one turn of the event loop takes (what is left is read on its next turn: a flood of
#: events kept up by someone never holds the loop).
READS_ON_THE_LOOP = 16

Identity = tuple[int, int]
"""A folder's device and inode (`os.fstat`)."""
Tell = Callable[..., Any]
"""How a read off the loop hands it a call: `loop.call_soon_threadsafe` (on the loop: called at once)."""


class Outboxes:
    """The watches on served inboxes' `responses/`, and what each folder was seen to hold."""

    def __init__(
        self,
        foreign: Callable[[str, int, str], None],
        overflowed: Callable[[], None],
        fault: Callable[[str], None] = lambda checkpoint: None,
        view_max: int = VIEW_MAX,
    ) -> None:
        """`foreign(folder, pid, target)`: another process's temp file appeared (`watch.Foreign`);
        `overflowed()`: events were lost (any of them may have been such a temp)."""
        self.view_max = view_max
        self.ino = Inotify(fault)
        self.fd = self.ino.fd
        self.foreign, self.overflowed = foreign, overflowed
        self._lock = threading.Lock()
        self._folder_of: dict[int, str] = {}
        self._identity: dict[int, Identity] = {}
        self._wd_of: dict[Identity, int] = {}
        #: By watch: the names listed once it existed, and those created since (none: not listed yet),
        #: as the kernel gives them (bytes: a burst's names are never decoded); and its bound.
        self._views: dict[int, tuple[set[bytes], int]] = {}
        self._closed = False
        #: Reads taken so far, by anyone: the loop reads the instance itself during a burst's stream
        #: only when no trip has read it for a while (`watch._SessionTree.on_readable`).
        self.reads = 0

    def watch(self, folder: str, fd: int, path: str) -> bool:
        """Watch `responses/` of `folder` (open as `fd`, at `path`: `/proc/self/fd/<fd>`); False when
        it is not there (any more). Under the lock from the watch's making on: a look in between would
        read (and drop) the new watch's first events before its folder is known (review2, 3)."""
        info = os.fstat(fd)
        with self._lock:
            wd = self.ino.add_watch(path, OUTBOX_EVENTS)
            if wd is None:
                return False
            old = self._identity.get(wd)
            if old is not None and self._wd_of.get(old) == wd:
                del self._wd_of[old]
            self._folder_of[wd] = folder
            self._identity[wd] = identity = (info.st_dev, info.st_ino)
            self._wd_of[identity] = wd
            self._views.pop(wd, None)
        return True

    def watches(self, wd: int) -> bool:
        return wd in self._folder_of

    def read(self) -> int:
        """Read the events waiting, on the loop; how many bytes there were. What they tell the loop is
        told once the lock is let go (a call told may come back here)."""
        told: list[tuple[Callable[..., Any], tuple[object, ...]]] = []
        with self._lock:
            total = self._read(lambda call, *args: told.append((call, args)), READS_ON_THE_LOOP)
        for call, args in told:
            call(*args)
        return total

    def _read(self, tell: Tell, reads: int = READS_AT_MOST) -> int:
        """Up to `reads` full reads; at `READS_AT_MOST`, a look that could not read all that was queued
        vouches for nothing until listed again."""
        self.reads += 1
        total = 0
        for _ in range(reads):
            try:
                data = self.ino.read_raw()
            except OSError:
                data = b""
                self._lost(tell)
            self._parse(data, tell)
            total += len(data)
            if len(data) < READ_SIZE - MAX_EVENT_SIZE:
                break
        else:
            if reads >= READS_AT_MOST:
                self._views.clear()  # more keeps coming: vouch for nothing until listed again
        if total:
            for wd in [wd for wd, (view, bound) in self._views.items() if len(view) > bound]:
                del self._views[wd]  # listed again at the next look
        return total

    def _parse(self, data: bytes, tell: Tell) -> None:
        """A read whose events are all names of response files (`.json`, none special) in one watched
        folder (a burst's answers linked in) goes into its view at once; any other, one event at a time
        (`_parse_each`)."""
        if (read := burst(data)) is not None and read.all_end_with(b".json") and not any(
                map(and_, read.masks, repeat(IN_Q_OVERFLOW | IN_IGNORED))):
            if (view := self._views.get(read.wd)) is not None:
                view[0].update(read.names())
            return
        self._parse_each(data, tell)

    def _parse_each(self, data: bytes, tell: Tell) -> None:
        # A burst's names (this node's own answers linked in, one per ask) go into their folder's view
        # one after the other: the view of the watch before is kept at hand until another watch's event
        # or a special one (which may drop views) comes.
        views, folder_of = self._views, self._folder_of
        offset, last, size, unpack = 0, len(data) - HEADER.size, HEADER.size, HEADER.unpack_from
        at_hand, add = -1, None
        while offset <= last:
            wd, mask, _cookie, length = unpack(data, offset)
            start = offset + size
            offset = start + length
            raw = data[start:offset].rstrip(b"\0")
            if mask & (IN_Q_OVERFLOW | IN_IGNORED):
                at_hand = -1
                if mask & IN_Q_OVERFLOW:
                    self._lost(tell)
                else:
                    self._forget(wd)
                continue
            if raw.endswith(b".json"):
                if wd != at_hand:
                    at_hand = wd
                    add = None if (view := views.get(wd)) is None else view[0].add
                if add is not None:
                    add(raw)
                continue
            folder = folder_of.get(wd)
            name = raw.decode(FS_ENCODING, FS_ERRORS)
            pid, target = temp_writer(name), temp_target(name)
            if folder is not None and pid is not None and target is not None and pid != os.getpid():
                tell(self.foreign, folder, pid, target)

    def _lost(self, tell: Tell) -> None:
        self._views.clear()
        tell(self.overflowed)

    def _forget(self, wd: int) -> None:
        self._folder_of.pop(wd, None)
        self._views.pop(wd, None)
        identity = self._identity.pop(wd, None)
        if identity is not None and self._wd_of.get(identity) == wd:
            del self._wd_of[identity]

    def existing(self, fd: int, names: Collection[str], tell: Tell) -> frozenset[str] | None:
        """Of `names`, those the folder open as `fd` holds (each looked at: `os.access`), when its
        watch can vouch for every other (None: it cannot; the caller looks its own way). Off the loop,
        `tell` hands the loop what the read finds for it."""
        info = os.fstat(fd)
        with self._lock:
            if self._closed:
                return None
            self._read(tell)
            wd = self._wd_of.get((info.st_dev, info.st_ino))
            if wd is None:
                return None
            if (known := self._views.get(wd)) is not None:
                view = known[0]
            else:  # listed now: whatever is created from now on is queued, read next time
                if (live := self._rewatched(fd, wd)) is None:
                    return None
                wd = live
                try:
                    view = {os.fsencode(name) for name in os.listdir(fd)}
                except OSError:
                    return None
                self._views[wd] = (view, max(self.view_max, 2 * len(view)))
            wanted = {name.encode(FS_ENCODING, FS_ERRORS): name for name in names}
            maybe = [wanted[raw] for raw in view.intersection(wanted)]
        return frozenset(name for name in maybe
                         if os.access(name, os.F_OK, dir_fd=fd, follow_symlinks=False))

    def _rewatched(self, fd: int, wd: int) -> int | None:
        """The live watch of the folder open as `fd`, made sure of before it is listed: an overflow may
        have dropped the `IN_IGNORED` of the watch its identity names, and a folder made again on the
        same inode would be vouched for by a dead watch no event keeps up (review2, 1). A watch added
        on an inode this instance watches is that watch (the same number); on any other, a new one,
        which takes the old one's folder. A system call per listing (rare)."""
        try:
            live = self.ino.add_watch(platform.proc_fd_path(fd), OUTBOX_EVENTS)
        except OSError:  # watches used up, or refused: vouch for nothing; the caller looks its own way
            return None
        if live is None or live == wd:
            return live
        folder, identity = self._folder_of.get(wd), self._identity.get(wd)
        self._forget(wd)
        if folder is None or identity is None:  # never: `wd` was found by its identity
            return None
        self._folder_of[live], self._identity[live], self._wd_of[identity] = folder, identity, live
        self._views.pop(live, None)
        return live

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._views.clear()
            self._wd_of.clear()
            self.ino.close()


_registry_lock = threading.Lock()
_watched: list[tuple[Outboxes, Tell]] = []


def register(outboxes: Outboxes, tell: Tell) -> None:
    """Make `outboxes` vouch for the folders it watches to looks in this process (`existing_responses`)."""
    with _registry_lock:
        _watched.append((outboxes, tell))


def unregister(outboxes: Outboxes) -> None:
    with _registry_lock:
        _watched[:] = [(o, t) for o, t in _watched if o is not outboxes]


def existing(fd: int, names: Collection[str]) -> frozenset[str] | None:
    """Of `names`, those `responses/` open as `fd` holds, from a watch that can vouch for the folder;
    None when none can."""
    with _registry_lock:
        watched = list(_watched)
    for outboxes, tell in watched:
        found = outboxes.existing(fd, names, tell)
        if found is not None:
            return found
    return None
