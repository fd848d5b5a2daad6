"""Proof of serving: the heartbeat newer pi children look for, and the lock that keeps one server.

A newer child abandons after 2 s unless `<root>/serving/<enc(id)>.json` names a live pid with a
fresh `updatedAt`; two servers on one inbox would race to answer, so a session is held by an
exclusive `flock` in pi-authorizer's state directory for as long as it is served.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core import platform
from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.disk.entries import read_small, remove
from core.disk.paths import encode_session_id
from core.disk.tree import Anchor, UnsafeFolder
from core.disk.writer import DISK, DiskWriter
from core.wire.base import compact_json, strict_json_loads

log = logging.getLogger("pi_authorizer.serve")

HEARTBEAT_INTERVAL_S = 1.0
HEARTBEAT_STALE_MS = 5_000
#: How far ahead of this clock a heartbeat's `updatedAt` may be and still count (one machine's
#: processes share a clock): a record dated further ahead proves no live server, it is a file made
#: to look fresh for ever.
FUTURE_SKEW_MS = 2_000
#: How long a session lock whose recorded holder is dead (a zombie) may take to be released.
DEAD_HOLDER_GRACE_S = 2.0
_HEARTBEAT_MAX_BYTES = 64 * 1024


def heartbeat_path(root: Path, session_id: str) -> Path:
    """`<root>/serving/<enc(id)>.json`: beside `sessions/`, never inside it."""
    return root / "serving" / f"{encode_session_id(session_id)}.json"


def pid_alive(pid: int) -> bool:
    """`kill(pid, 0)` as the reference checks it (EPERM still means the process exists), except that
    a zombie (killed, not yet reaped by its parent) is dead: it serves nothing."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not platform.is_zombie(pid)


def not_a_server(pid: int) -> str | None:
    """Why process `pid` cannot be another server of this user's inboxes (`None`: it may be one).

    A file names a pid; the file is its writer's claim. Only a live process of this user, never the
    system's init (pid 1, alive for ever), is believed a server; this process is the caller's to
    exclude (its own heartbeat is no other server)."""
    if pid <= 1:
        return f"pid {pid} is the system's init, never a server"
    if not pid_alive(pid):
        return f"pid {pid} is not running"
    uid = platform.process_uid(pid)
    if uid is None:
        try:
            os.kill(pid, 0)
        except PermissionError:  # where the owner cannot be read: only another user's is refused
            return f"pid {pid} runs as another user"
        except ProcessLookupError:
            return f"pid {pid} is not running"
    elif uid != os.getuid():
        return f"pid {pid} runs as another user (uid {uid})"
    return None


@dataclass(frozen=True)
class HeartbeatRecord:
    session_id: str
    pid: int
    updated_at_ms: float

    def state(self, now_ms: float) -> Literal["alive", "stale", "dead_pid"]:
        """`alive`, `stale` or `dead_pid`, the reference's words for a record that exists; `alive` only
        when `doubt` finds nothing (a pid 1, another user's process or a future date is no server)."""
        doubt = self.doubt(now_ms)
        if doubt is None:
            return "alive"
        return "stale" if doubt.startswith("its updatedAt") else "dead_pid"

    def doubt(self, now_ms: float) -> str | None:
        """Why this record proves no live server now, in words for the log and the person (`None`: it
        does): dated too far ahead or too long ago, or naming a process that cannot be a server."""
        ahead = self.updated_at_ms - now_ms
        if ahead > FUTURE_SKEW_MS:
            return f"its updatedAt is {ahead / 1000:.0f} s in the future"
        if -ahead > HEARTBEAT_STALE_MS:
            return f"its updatedAt is {-ahead / 1000:.0f} s old"
        return not_a_server(self.pid)


def read_heartbeat(path: Path) -> HeartbeatRecord | None:
    """A heartbeat as a child validates it, or `None` when absent or malformed (tests and tools)."""
    try:
        return parse_heartbeat(path.read_bytes())
    except OSError:
        return None


def read_heartbeat_in(anchor: Anchor, session_id: str) -> HeartbeatRecord | None:
    """The heartbeat under `anchor`, read through descriptors; a linked `serving/` counts as none."""
    try:
        with anchor.folder(("serving",)) as fd:
            data = read_small(fd, f"{encode_session_id(session_id)}.json", _HEARTBEAT_MAX_BYTES)
    except OSError:
        return None
    return None if data is None else parse_heartbeat(data)


def parse_heartbeat(data: bytes) -> HeartbeatRecord | None:
    try:
        obj = strict_json_loads(data)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    sid, pid, updated = obj.get("sessionId"), obj.get("pid"), obj.get("updatedAt")
    if not isinstance(sid, str) or not sid or isinstance(pid, bool) or not isinstance(pid, int):
        return None
    if pid <= 0 or isinstance(updated, bool) or not isinstance(updated, int | float):
        return None
    return HeartbeatRecord(session_id=sid, pid=pid, updated_at_ms=float(updated))


class Heartbeat:
    """Writes and refreshes one session's serving record; removes it on `clear()`.

    `serving/` is opened from the root by descriptor: when it is a link, `beat()` raises
    `UnsafeFolder` and nothing is written or removed through it.
    """

    def __init__(
        self,
        root: Path,
        session_id: str,
        anchor: Anchor | None = None,
        clock: Clock = SYSTEM_CLOCK,
        writer: DiskWriter = DISK,
    ) -> None:
        self.session_id = session_id
        self.path = heartbeat_path(root, session_id)
        self.tree = anchor or Anchor(root, "forwarding root")
        self.clock = clock
        self.writer = writer
        #: A pid the person chose to take the session over from (`Sessions.take_over`): its record is
        #: written over and it is never taken for another server again.
        self.overruled: int | None = None

    def beat(self) -> None:
        """Refresh the record. Padded with spaces to a fixed size, so a refresh rewrites the file in
        place (`DiskWriter.overwrite`) and needs no new space: it works on a full disk. The first
        beat (or one after the file was removed or replaced) writes a new file and renames it over."""
        record = {"sessionId": self.session_id, "pid": os.getpid(), "updatedAt": wall_ms(self.clock)}
        data = compact_json(record)
        data += b" " * (-(len(data) + 16) % 64 + 16)  # JSON allows trailing whitespace
        with self.tree.folder(("serving",), create=True) as fd:
            if self.foreign() is not None:
                return  # another live server's record: never written over (serving reports it)
            if not self.writer.overwrite(fd, self.path.name, data):
                self.writer.replace(fd, self.path.name, data)

    def foreign(self) -> HeartbeatRecord | None:
        """The record, when it is another live server's: fresh, naming a live pid not this process's."""
        current = read_heartbeat_in(self.tree, self.session_id)
        if current is None or current.pid in (os.getpid(), self.overruled):
            return None
        return current if current.state(wall_ms(SYSTEM_CLOCK)) == "alive" else None

    def clear(self) -> None:
        """Remove our record, but never another process's (nor anything through a link)."""
        current = read_heartbeat_in(self.tree, self.session_id)
        if current is None or current.pid != os.getpid():
            return
        with contextlib.suppress(OSError), self.tree.folder(("serving",)) as fd:
            remove(fd, self.path.name)


class SessionHeld(Exception):
    """Another process already serves this session; `holder` says who, for the person."""

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(f"session {session_id!r} is already served by {holder}")
        self.session_id = session_id
        self.holder = holder


class SessionLock:
    """An exclusive, non-blocking `flock` on `<state>/locks/<enc(id)>.lock` naming its holder."""

    def __init__(
        self, state_dir: Path, session_id: str, anchor: Anchor | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.session_id = session_id
        self.path = state_dir / "locks" / f"{encode_session_id(session_id)}.lock"
        self.tree = anchor or Anchor(state_dir, "state dir")
        self.clock = clock
        self._fd: int | None = None
        self.previous_pid: int | None = None

    def acquire(self) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        with self.tree.folder(("locks",), create=True) as locks:
            try:
                fd = os.open(self.path.name, flags, 0o600, dir_fd=locks)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafeFolder(str(self.path), "is a symbolic link (never followed)") from None
                raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafeFolder(str(self.path), "is not a regular file")
            deadline = self.clock.monotonic() + DEAD_HOLDER_GRACE_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    # A holder killed with -9 is a zombie while its other threads still exit; the
                    # kernel drops its lock a moment later. Only a live holder refuses at once.
                    pid = _holder_pid(fd)
                    if pid is None or pid_alive(pid) or self.clock.monotonic() > deadline:
                        raise SessionHeld(self.session_id, _describe_holder(fd)) from None
                    time.sleep(0.005)
        except BaseException:
            os.close(fd)
            raise
        # Who held it last (a process killed with -9 leaves its record): its heartbeat is not a server.
        self.previous_pid = _holder_pid(fd)
        record = {"pid": os.getpid(), "sessionId": self.session_id, "since": wall_ms(self.clock)}
        try:
            os.ftruncate(fd, 0)
            os.write(fd, compact_json(record))
        except OSError as exc:  # a full disk: the lock is held all the same; only its note is missing
            log.warning("session lock %s: its holder not noted (waiting for disk): %s", self.path, exc)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def live_foreign_server(
    root: Path, session_id: str, anchor: Anchor | None = None, clock: Clock = SYSTEM_CLOCK
) -> HeartbeatRecord | None:
    """A fresh heartbeat of another live process (a pi parent, another authorizer), if any."""
    record = read_heartbeat_in(anchor or Anchor(root, "forwarding root"), session_id)
    if record is None or record.pid == os.getpid():
        return None
    return record if record.state(wall_ms(clock)) == "alive" else None


def _holder_pid(fd: int) -> int | None:
    try:
        obj = strict_json_loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return None
    pid = obj.get("pid") if isinstance(obj, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


def _describe_holder(fd: int) -> str:
    pid = _holder_pid(fd)
    return f"pi-authorizer pid {pid}" if pid is not None else "another pi-authorizer process"

