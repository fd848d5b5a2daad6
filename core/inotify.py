"""A minimal Linux inotify binding on the asyncio loop (ctypes over libc; no thread, no polling).

`watchfiles` wakes on a sleep loop (a few ms per event, and a steady idle cost); the kernel's fd
readiness costs nothing while idle and delivers an event in well under a millisecond.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from dataclasses import dataclass

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
_HEADER = struct.Struct("iIII")


@dataclass(frozen=True)
class Event:
    wd: int
    mask: int
    name: str


class InotifyUnavailable(OSError):
    """No inotify here (not Linux, or the instance/watch limit is reached)."""


class Inotify:
    """One inotify instance: add watches on directories, read decoded events without blocking."""

    def __init__(self) -> None:
        path = ctypes.util.find_library("c")
        if path is None:
            raise InotifyUnavailable("libc not found")
        libc = ctypes.CDLL(path, use_errno=True)
        try:
            self._add = libc.inotify_add_watch
            self._rm = libc.inotify_rm_watch
            init = libc.inotify_init1
        except AttributeError as exc:
            raise InotifyUnavailable("this libc has no inotify") from exc
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._rm.argtypes = [ctypes.c_int, ctypes.c_int]
        fd = init(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise InotifyUnavailable(err, f"inotify_init1 failed: {os.strerror(err)}")
        self.fd: int = fd

    def add_watch(self, path: str, mask: int = DIRECTORY_EVENTS) -> int | None:
        """The watch descriptor, or None when the directory is not there (yet)."""
        wd: int = self._add(self.fd, os.fsencode(path), mask)
        if wd >= 0:
            return wd
        err = ctypes.get_errno()
        if err in {2, 20}:  # ENOENT, ENOTDIR: not there (yet), or not a directory
            return None
        raise InotifyUnavailable(err, f"inotify_add_watch({path!r}) failed: {os.strerror(err)}")

    def read_events(self) -> list[Event]:
        try:
            data = os.read(self.fd, 64 * 1024)
        except BlockingIOError:
            return []
        events: list[Event] = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            raw = data[offset : offset + length].rstrip(b"\0")
            offset += length
            events.append(Event(wd=wd, mask=mask, name=os.fsdecode(raw)))
        return events

    def close(self) -> None:
        os.close(self.fd)
