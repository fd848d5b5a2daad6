"""What this operating system offers, asked in one place: descriptor flags, a rename that never
replaces, anonymous files, a flush that reaches the drive, a whole-filesystem sync, which change
notification to use, and what a process's state says.

Why one module: pi's users are on Linux and macOS, and a Linux-only name touched at import (`os.O_PATH`)
stops every command on a Mac. So nothing here or elsewhere touches one at import: flags are read with
`getattr`, libc is loaded at first use, and every caller asks this module instead of checking the
system itself (`tests/test_static.py` forbids the Linux-only names anywhere else).

`PI_AUTHORIZER_PORTABLE=1` (read once, at import) turns off every Linux-only capability (inotify,
`O_PATH`, `O_TMPFILE`, `/proc` linking, `renameat2`, `syncfs`), so the portable paths a Mac takes run,
and are tested, on Linux too (`.ci/run` runs the disk and serving tests so a second time).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import select
import sys
import time
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

LINUX_ONLY_OS = frozenset({
    "O_PATH", "O_TMPFILE", "O_DIRECT", "O_NOATIME", "O_LARGEFILE", "O_RSYNC", "fdatasync", "pipe2",
    "memfd_create", "eventfd", "pidfd_open", "splice", "copy_file_range", "posix_fallocate",
    "posix_fadvise", "sched_getaffinity", "getxattr", "setxattr", "listxattr", "removexattr", "getrandom",
})
"""`os` names macOS's Python lacks: only this module may touch one, and never at import."""
LINUX_ONLY_CALLS = frozenset({
    "renameat2", "renameatx_np", "syncfs", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    "F_FULLFSYNC", "linkat",
})
"""System calls looked up by name (libc through `ctypes`, `fcntl`): only this module names one."""

PORTABLE = os.environ.get("PI_AUTHORIZER_PORTABLE", "").strip() not in {"", "0"}
"""Every Linux-only capability turned off (the switch is read once, here)."""
LINUX = sys.platform.startswith("linux") and not PORTABLE
"""Linux, and its own capabilities wanted (not `PORTABLE`)."""
MACOS = sys.platform == "darwin"


def _linux_flag(name: str) -> int:
    return getattr(os, name, 0) if LINUX else 0


O_PATH = _linux_flag("O_PATH")
"""0 where missing: a folder is then opened for reading to walk below it."""
O_TMPFILE = _linux_flag("O_TMPFILE")
"""0 where missing: responses are staged as named temps."""
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A folder opened to list and to act in, never through a link."""
SEARCH_FLAGS = (O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A folder opened only to walk below it (`O_PATH`: search permission suffices)."""
SQLITE_FULLFSYNC = MACOS
"""SQLite's `fsync` on macOS leaves the data in the drive's cache; `PRAGMA fullfsync` flushes it."""


@functools.cache
def _libc() -> Any:
    """This process's C library, loaded at first use (`ctypes` is imported only here)."""
    import ctypes  # lazily: most commands never need it

    return ctypes.CDLL(None, use_errno=True)


def _errno() -> int:
    import ctypes

    return ctypes.get_errno()


def _function(name: str) -> Any:
    """libc's `name`, or None where this libc has none (or libc cannot be loaded)."""
    try:
        return getattr(_libc(), name, None)
    except OSError:
        return None


_RENAME_NOREPLACE = 1  # Linux renameat2
_RENAME_EXCL = 0x4  # macOS renameatx_np


@functools.cache
def _noreplace_call() -> tuple[Any, int] | None:
    if LINUX:
        call = _function("renameat2")
        return None if call is None else (call, _RENAME_NOREPLACE)
    if MACOS:
        call = _function("renameatx_np")
        return None if call is None else (call, _RENAME_EXCL)
    return None


def rename_noreplace(dir_fd: int, source: str, target: str) -> bool | None:
    """Rename `source` to `target` within one folder unless `target` exists: `True` done, `False`
    the target exists, `None` when neither the system nor the filesystem offers it (the caller then
    links and unlinks). `renameat2(RENAME_NOREPLACE)` on Linux, `renameatx_np(RENAME_EXCL)` on macOS."""
    found = _noreplace_call()
    if found is None:
        return None
    call, flag = found
    if call(dir_fd, os.fsencode(source), dir_fd, os.fsencode(target), flag) == 0:
        return True
    error = _errno()
    if error == errno.EEXIST:
        return False
    if error in {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP}:
        return None
    raise OSError(error, os.strerror(error), target)


def syncfs(fd: int) -> bool:
    """Flush the whole filesystem holding `fd` (one call for a batch of files); `False` where the
    system has no such call (Linux only)."""
    call = _function("syncfs") if LINUX else None
    if call is None:
        return False
    if call(fd) == 0:
        return True
    error = _errno()
    raise OSError(error, os.strerror(error), "syncfs")


def full_fsync(fd: int) -> None:
    """Make `fd`'s data durable on the drive: `fsync`, and on macOS `F_FULLFSYNC` (its `fsync`
    only hands the data to the drive, whose cache may lose it at a power cut). A filesystem that
    refuses `F_FULLFSYNC` gets the plain `fsync`."""
    if MACOS:
        import fcntl

        command = getattr(fcntl, "F_FULLFSYNC", None)
        if command is not None:
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, command)
                return
    os.fsync(fd)


_AT_EMPTY_PATH = 0x1000


@functools.cache
def _linkat() -> Any:
    return _function("linkat") if LINUX else None


#: How `os.fsencode` encodes a name (asked once: it runs once per answer of a burst).
_FS_ENCODING = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())


def link_descriptor(fd: int, dir_fd: int, target: str) -> bool | None:
    """Name the open file `fd` (an anonymous file) `target` in `dir_fd` unless `target` exists, by the
    descriptor itself (`linkat` with `AT_EMPTY_PATH`: no `/proc/self/fd/N` path for the kernel to walk,
    ~0.7 µs less per answer): `True` done, `False` the target exists, `None` where the kernel refuses
    it (before Linux 6.10 it needs `CAP_DAC_READ_SEARCH`; the caller links through `/proc` then)."""
    call = _linkat()
    if call is None:
        return None
    if call(fd, b"", dir_fd, target.encode(*_FS_ENCODING), _AT_EMPTY_PATH) == 0:
        return True
    error = _errno()
    if error == errno.EEXIST:
        return False
    if error in {errno.ENOENT, errno.EPERM, errno.EINVAL, errno.ENOSYS, errno.EACCES}:
        return None
    raise OSError(error, os.strerror(error), target)


def proc_fd_path(fd: int) -> str:
    """The path naming this process's descriptor `fd` (only where `anonymous_files()`)."""
    return f"/proc/self/fd/{fd}"


@functools.cache
def proc_names_descriptors() -> bool:
    """Whether `/proc/self/fd/N` is this process's descriptor N (a real procfs, Linux only)."""
    if not LINUX:
        return False
    fd = os.open("/", DIR_FLAGS)
    try:
        seen, held = os.stat(proc_fd_path(fd)), os.fstat(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return (seen.st_dev, seen.st_ino) == (held.st_dev, held.st_ino)


def anonymous_files() -> bool:
    """Whether a file can be made with no name (`O_TMPFILE`) and named later through `/proc`."""
    return bool(O_TMPFILE) and proc_names_descriptors()


def is_zombie(pid: int) -> bool:
    """Whether `pid` has exited and not been reaped (`/proc/<pid>/stat`; `False` where unknown)."""
    if not LINUX:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    # `pid (comm) S ...`: comm may hold spaces and parentheses, the state follows the last `)`.
    end = stat.rfind(b")")
    return stat[end + 2 : end + 3] == b"Z"


def process_uid(pid: int) -> int | None:
    """The user id `pid` runs as (`/proc/<pid>`'s owner), or `None` where that cannot be known (gone,
    or not Linux: callers fall back on `kill(pid, 0)`, which refuses another user's process)."""
    if not LINUX:
        return None
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def process_command(pid: int, limit: int = 160) -> str | None:
    """The command line `pid` runs (`/proc/<pid>/cmdline`, arguments joined by spaces, cut at `limit`),
    or `None` where it cannot be read: evidence for the person, never trusted (a process names itself)."""
    if not LINUX:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            data = handle.read(limit * 4)
    except OSError:
        return None
    text = data.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    return (text[:limit] + "…" if len(text) > limit else text) or None


WatchBackend = Literal["inotify", "kqueue", "polling"]


def watch_backend() -> WatchBackend:
    """How folders are watched for changes: inotify on Linux, kqueue on macOS and the BSDs, else
    listing them every so often."""
    if LINUX:
        return "inotify"
    if hasattr(select, "kqueue") and not sys.platform.startswith("linux"):
        return "kqueue"
    return "polling"


class InotifyCalls(NamedTuple):
    """libc's inotify calls; each raises `OSError` (with its errno) instead of returning -1."""

    init: Callable[[int], int]
    add_watch: Callable[[int, str, int], int]
    rm_watch: Callable[[int, int], None]


@functools.cache
def inotify_calls() -> InotifyCalls | None:
    """The inotify calls, or None where there are none (not Linux, `PORTABLE`, a libc without them)."""
    if watch_backend() != "inotify":
        return None
    import ctypes

    init, add, remove = (_function(n) for n in ("inotify_init1", "inotify_add_watch", "inotify_rm_watch"))
    if init is None or add is None or remove is None:
        return None
    add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    remove.argtypes = [ctypes.c_int, ctypes.c_int]

    def checked(result: int, what: str) -> int:
        if result < 0:
            error = _errno()
            raise OSError(error, f"{what} failed: {os.strerror(error)}")
        return result

    def add_watch(fd: int, path: str, mask: int) -> int:
        return checked(add(fd, os.fsencode(path), mask), f"inotify_add_watch({path!r})")

    def rm_watch(fd: int, wd: int) -> None:
        remove(fd, wd)

    return InotifyCalls(lambda flags: checked(init(flags), "inotify_init1"), add_watch, rm_watch)


#: The fault checkpoint before each inotify watch is added (tests make the kernel refuse one).
ADD_WATCH_CHECKPOINT = "inotify_add_watch"


def inotify_watch_limit() -> int | None:
    """The user's inotify watch limit (`fs.inotify.max_user_watches`), or None where unknown."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as limit:
            return int(limit.read().strip())
    except (OSError, ValueError):
        return None


def command_line(pid: int) -> list[str] | None:
    """The arguments process `pid` was started with (`/proc/<pid>/cmdline`); None where unknown
    (the process is gone, or this OS has no procfs: the caller asks `ps`)."""
    if not LINUX:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(1 << 16)
    except OSError:
        return None
    return [os.fsdecode(word) for word in raw.split(b"\0") if word] or None


def booted_at() -> float | None:
    """When this machine last started, by the wall clock (None where the kernel does not say): a
    response cut short by a power cut can only be left by a run before it (`Reconcile.earlier`)."""
    boot = getattr(time, "CLOCK_BOOTTIME", None)
    if boot is None:
        return None
    try:
        return time.time() - time.clock_gettime(boot)
    except OSError:
        return None
