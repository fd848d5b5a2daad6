"""A minimal Linux inotify binding on the asyncio loop (libc's calls, found by `core.platform`; no
thread, no polling).

The one change-notification stack of this node (the forwarding root's watcher and config reloads):
the kernel's fd readiness costs nothing while idle and delivers an event in well under a
millisecond, where a polling library wakes on a sleep loop. Where inotify is missing, each user
falls back to what it already has for missed events (a rescan, a re-check), so no second stack.
"""

from __future__ import annotations

import asyncio
import errno
import os
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from operator import itemgetter
from typing import NamedTuple

from core import platform
from core.clock import SYSTEM_CLOCK, Clock, wait_either

IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

DIRECTORY_EVENTS = (
    IN_CREATE
    | IN_DELETE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CLOSE_WRITE
    | IN_ATTRIB
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
)
#: An event's header as the kernel writes it (wd, mask, cookie, length of the name that follows).
HEADER = struct.Struct("iIII")
#: How much one read takes (a burst's ~1,000 events), and the most one event can need (its header
#: and a name of NAME_MAX bytes and its NUL): a read that came back fuller than their difference
#: may have left more behind.
READ_SIZE = 64 * 1024
MAX_EVENT_SIZE = HEADER.size + 256
#: `os.fsdecode` without its per-call lookups (the same encoding and error handler).
FS_ENCODING, FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


class Burst(NamedTuple):
    """A read whose events all have one watch and names of one length in records of one size: a burst's
    (a request id and `.json` each, renamed in, linked, removed). What a parser needs of it is told
    apart in C, without a Python step per event (`burst`)."""

    data: bytes
    wd: int
    masks: list[int]
    #: Where each event's name starts in `data`, and the length of every name (no NUL in it).
    starts: range
    length: int

    def all_end_with(self, suffix: bytes) -> bool:
        """Whether every name ends with `suffix` (compared a byte at a time across all of them)."""
        data, starts, length = self.data, self.starts, self.length
        if len(suffix) > length:
            return False
        at = starts.start + length - len(suffix)
        return all(data[at + i::starts.step].count(byte) == len(starts) for i, byte in enumerate(suffix))

    def names(self, chosen: Iterable[object] | None = None) -> list[bytes]:
        """Every name, in order; or those whose entry of `chosen` (one per event) is true."""
        starts, length = self.starts, self.length
        key = (starts.step, length)
        if (cut := _NAMES.get(key)) is None:
            after = starts.step - starts.start - length
            cut = _NAMES[key] = struct.Struct(f"{starts.start}x{length}s{after}x")
        names = map(_FIRST, cut.iter_unpack(self.data))
        return list(names if chosen is None else compress(names, chosen))


#: How a `Burst`'s names are cut out of its records, by record size and name length (a handful: a
#: burst's names are of one length).
_NAMES: dict[tuple[int, int], struct.Struct] = {}
_FIRST = itemgetter(0)


def burst(data: bytes) -> Burst | None:
    """`data` as a `Burst`, or None when its events are not all alike (the caller walks them one by one).
    Each header found where the one before says its event ends gives the same record size, so records
    cut at that size are the events the kernel wrote; a name holds no NUL and its padding is all NUL,
    so each name is as long as the first when its last byte is not NUL and the byte after it (if in
    the record) is (`tests/core/test_inotify_burst.py` compares a burst with a walk of its events)."""
    size, total = HEADER.size, len(data)
    if total < size:
        return None
    wd, _mask, _cookie, padded = HEADER.unpack_from(data)
    record = size + padded
    if not padded or record % 4 or total % record:
        return None
    count, step = total // record, record // 4
    words = memoryview(data).cast("I")
    if (words[3::step].tobytes() != words[3:4].tobytes() * count
            or words[0::step].tobytes() != words[0:1].tobytes() * count):
        return None
    length = data.find(0, size, record)
    if length < 0:
        length = padded
    else:
        length -= size
        if not length or data[size + length::record].count(0) != count:
            return None
    if data[size + length - 1::record].count(0):
        return None
    return Burst(data, wd, words[1::step].tolist(), range(size, total, record), length)


class Event(NamedTuple):
    """One decoded event (a tuple: a burst of 10,000 files is 20,000 of them, decoded on the loop)."""

    wd: int
    mask: int
    name: str


class InotifyUnavailable(OSError):
    """No inotify here (not Linux, or the instance/watch limit is reached)."""


class WatchesExhausted(InotifyUnavailable):
    """`inotify_add_watch` refused with ENOSPC: the user's watches (shared by every program of the
    user) are used up. The message says the limit, so the operator knows what to raise."""


class Inotify:
    """One inotify instance: add watches on directories, read decoded events without blocking."""

    def __init__(self, fault: Callable[[str], None] = lambda checkpoint: None) -> None:
        """`fault`: called (`inotify_add_watch`) before each watch is added; an `OSError` it raises is
        taken as that call's failure (the fault seam: tests make the kernel refuse a watch)."""
        self.fault = fault
        calls = platform.inotify_calls()
        if calls is None:
            raise InotifyUnavailable(f"no inotify here ({platform.watch_backend()} instead)")
        self._calls = calls
        try:
            self.fd: int = calls.init(IN_NONBLOCK | IN_CLOEXEC)
        except OSError as exc:
            raise InotifyUnavailable(exc.errno, str(exc)) from None

    def add_watch(self, path: str, mask: int = DIRECTORY_EVENTS) -> int | None:
        """The watch descriptor, or None when the directory is not there (yet)."""
        try:
            self.fault(platform.ADD_WATCH_CHECKPOINT)
            return self._calls.add_watch(self.fd, path, mask)
        except OSError as exc:
            err = exc.errno or errno.EIO
            if err in {errno.ENOENT, errno.ENOTDIR}:  # not there (yet), or not a directory
                return None
            if err == errno.ENOSPC:
                limit = platform.inotify_watch_limit()
                said = f"{limit:,}" if limit is not None else "unknown"
                why = (f"the user's inotify watches are used up (fs.inotify.max_user_watches = {said},"
                       " shared by every program of this user)")
                raise WatchesExhausted(err, why) from None
            raise InotifyUnavailable(err, str(exc)) from None

    def rm_watch(self, wd: int) -> None:
        """Stop watching; a watch the kernel already dropped (its folder went away) is no error."""
        self._calls.rm_watch(self.fd, wd)

    def read_raw(self) -> bytes:
        """The events waiting, as the kernel wrote them (`HEADER` and name each; empty when none):
        a burst's are told apart without an `Event` each (`core.forwarding.watch`)."""
        try:
            return os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return b""

    def read_events(self) -> list[Event]:
        data = self.read_raw()
        events: list[Event] = []
        offset, end, size, unpack = 0, len(data), HEADER.size, HEADER.unpack_from
        new = tuple.__new__  # `Event(...)` without its Python-level `__new__` (a burst reads thousands)
        while offset + size <= end:
            wd, mask, _cookie, length = unpack(data, offset)
            offset += size
            raw = data[offset : offset + length].rstrip(b"\0")
            offset += length
            events.append(new(Event, (wd, mask, raw.decode(FS_ENCODING, FS_ERRORS))))
        return events

    def close(self) -> None:
        os.close(self.fd)


class FolderWatch:
    """Wakes `wait` as soon as anything changes in a few folders named by path (this node's config
    folders: the person's own, so links are followed). Without inotify it never wakes early and
    `wait` returns when its time is up: the caller's re-check does the work."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self._folders: tuple[str, ...] = ()
        self._wds: list[int] = []
        try:
            self._ino: Inotify | None = Inotify()
        except InotifyUnavailable:
            self._ino = None
            return
        asyncio.get_running_loop().add_reader(self._ino.fd, self._on_readable)

    def arm(self, folders: Sequence[str]) -> None:
        """Watch exactly `folders` (a folder that is not there is skipped until the next `arm`)."""
        if self._ino is None or tuple(folders) == self._folders:
            return
        for wd in self._wds:
            self._ino.rm_watch(wd)
        self._folders = tuple(folders)
        found = (self._ino.add_watch(f, DIRECTORY_EVENTS & ~IN_DONT_FOLLOW) for f in self._folders)
        self._wds = [wd for wd in found if wd is not None]

    async def wait(self, stop: asyncio.Event, at_most_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        """Until a change, `stop`, or `at_most_s` seconds on `clock`; a change seen before the call
        counts too."""
        await wait_either(self.changed, stop, at_most_s, clock)
        self.changed.clear()

    def _on_readable(self) -> None:
        if self._ino is None:
            return
        try:
            events = self._ino.read_events()
        except OSError:
            events = [Event(-1, IN_IGNORED, "")]
        if any(e.mask & IN_IGNORED for e in events):
            self._folders = ()  # a watched folder went away (or reading failed): arm afresh next time
        if events:
            self.changed.set()

    def close(self) -> None:
        if self._ino is not None:
            asyncio.get_running_loop().remove_reader(self._ino.fd)
            self._ino.close()
            self._ino = None
