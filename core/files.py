"""Entries of a folder opened by descriptor (`core.tree`): written, published, replaced, read and
removed relative to that descriptor, never through a link.

Size: the `DiskWriter` seam (every call that publishes a response: staging, syncing, placing) sits
beside the primitives it wraps, so a fault test subclasses one class; the anonymous files it stages
are `core.anonymous_files`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import stat
import threading

from core.anonymous_files import (
    ANONYMOUS_MAX,
    Staged,
    link_anonymous,
    proc_names_descriptors,
    write_anonymous,
)
from core.clock import SYSTEM_CLOCK, wall_ms
from core.tree import FILE_MODE, check_name, lstat_or_none

_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_COPY_CHUNK = 1 << 20


def temp_name(name: str) -> str:
    """`<name>.<pid>.<ms>.tmp`, the reference's temp naming (skipped by every `.json` lister)."""
    return f"{name}.{os.getpid()}.{wall_ms(SYSTEM_CLOCK)}.tmp"


def write_new(dir_fd: int, name: str, data: bytes, mode: int = FILE_MODE, sync: bool = True) -> None:
    """Create `name` exclusively (never through a link) and, unless told the caller syncs, make it durable."""
    fd = os.open(check_name(name), _NEW_FILE_FLAGS, mode, dir_fd=dir_fd)
    try:
        write_all(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` (`os.write` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_LIBC = ctypes.CDLL(None, use_errno=True)
_RENAMEAT2 = getattr(_LIBC, "renameat2", None)
_SYNCFS = getattr(_LIBC, "syncfs", None)
_RENAME_NOREPLACE = 1


def rename_noreplace(dir_fd: int, source: str, target: str) -> bool | None:
    """`renameat2(RENAME_NOREPLACE)` within one folder: `True` done, `False` the target exists,
    `None` when the kernel or filesystem does not offer it (the caller falls back to `link()`)."""
    if _RENAMEAT2 is None:
        return None
    src, dst = os.fsencode(check_name(source)), os.fsencode(check_name(target))
    if _RENAMEAT2(dir_fd, src, dir_fd, dst, _RENAME_NOREPLACE) == 0:
        return True
    error = ctypes.get_errno()
    if error == errno.EEXIST:
        return False
    if error in {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP}:
        return None
    raise OSError(error, os.strerror(error), target)


def syncfs(fd: int) -> bool:
    """Flush the whole filesystem holding `fd` (one call for a batch of files); `False` when unavailable."""
    if _SYNCFS is None:
        return False
    if _SYNCFS(fd) == 0:
        return True
    error = ctypes.get_errno()
    raise OSError(error, os.strerror(error), "syncfs")


class DiskWriter:
    """The file-system calls that publish a response, all relative to a folder's descriptor. An
    explicit seam: fault tests inject a writer that fails like a full or broken disk (ENOSPC, EIO)
    or a slow one, without patching this module.

    A response is staged as an anonymous file where the kernel and filesystem allow (`anonymous`):
    creating it does not lock `responses/` (a named create holds the folder while the filesystem
    looks for a free inode, and every rename and listing of the folder waits behind it), and a
    killed process leaves nothing behind. It is placed with `linkat` through `/proc/self/fd`, which
    never replaces an existing name. Elsewhere (no `O_TMPFILE`, no procfs, too many held open) it is
    a named temp renamed with `RENAME_NOREPLACE`."""

    anonymous = True
    anonymous_max = ANONYMOUS_MAX
    _held = 0  # anonymous files this writer holds open
    _lock = threading.Lock()
    _usable: bool | None = None  # whether /proc names descriptors, checked once per process

    def stage(self, dir_fd: int, name: str, data: bytes, sync: bool) -> Staged:
        """`data` in a file that is not visible yet; durable on return when `sync` (else `sync_all`
        or `sync_file` makes it so before it is placed)."""
        fd = self._write_anonymous(dir_fd, data) if self.anonymous else None
        if fd is None:
            if sync:
                self.write_new(dir_fd, name, data)
            else:
                self.write_unsynced(dir_fd, name, data)
            return Staged(name)
        staged = Staged(name, fd)
        if sync:
            try:
                os.fsync(fd)
            except BaseException:
                self.discard(dir_fd, staged)
                raise
        return staged

    def _write_anonymous(self, dir_fd: int, data: bytes) -> int | None:
        if DiskWriter._usable is None:
            DiskWriter._usable = proc_names_descriptors()
        with DiskWriter._lock:
            if not DiskWriter._usable or self._held >= self.anonymous_max:
                return None
            self._held += 1
        try:
            fd = write_anonymous(dir_fd, data)
        except BaseException:
            self._let_go()
            raise
        if fd is None:
            self._let_go()
        return fd

    def _let_go(self) -> None:
        with DiskWriter._lock:
            self._held -= 1

    def sync_file(self, dir_fd: int, staged: Staged) -> None:
        """Make one staged file durable (a batch too small for `sync_all`, or where it is missing)."""
        if staged.fd is not None:
            os.fsync(staged.fd)
            return
        fd = os.open(check_name(staged.name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def place(self, dir_fd: int, staged: Staged, target: str) -> bool:
        """Give the durable `staged` file the name `target` unless it exists (`False` then: it is
        still staged, the caller discards it); never replaces. On `True` nothing staged is left."""
        if staged.fd is None:
            return self.place_named(dir_fd, staged.name, target)
        if not link_anonymous(staged.fd, dir_fd, check_name(target)):
            return False
        self.discard(dir_fd, staged)
        return True

    def discard(self, dir_fd: int, staged: Staged) -> None:
        """Let go of a staged file that will not be placed (an anonymous one simply vanishes)."""
        if staged.fd is None:
            with contextlib.suppress(OSError, ValueError):
                remove(dir_fd, staged.name)
            return
        fd, staged.fd = staged.fd, None
        with contextlib.suppress(OSError):
            os.close(fd)
        self._let_go()

    def write_new(self, dir_fd: int, name: str, data: bytes) -> None:
        write_new(dir_fd, name, data)

    def link(self, dir_fd: int, source: str, target: str) -> None:
        os.link(source, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)

    def fsync_dir(self, dir_fd: int) -> None:
        os.fsync(dir_fd)

    def write_unsynced(self, dir_fd: int, name: str, data: bytes) -> None:
        """`write_new` without the fsync: a batch makes all its files durable at once (`sync_all`)."""
        write_new(dir_fd, name, data, sync=False)

    def sync_all(self, dir_fd: int) -> bool:
        """Make every file written on `dir_fd`'s filesystem durable (`syncfs`); `False` if unavailable."""
        return syncfs(dir_fd)

    def rename_noreplace(self, dir_fd: int, source: str, target: str) -> bool | None:
        """`rename_noreplace` (a test seam: `None` stands for a filesystem without it)."""
        return rename_noreplace(dir_fd, source, target)

    def place_named(self, dir_fd: int, source: str, target: str) -> bool:
        """Give the durable named file `source` the name `target` unless it exists (`False` then:
        `source` stays); never replaces. On `True` the name `source` is gone (the `link()` fallback
        removes it, so a rename, the usual case, costs no second call)."""
        done = self.rename_noreplace(dir_fd, source, target)
        if done is not None:
            return done
        try:
            self.link(dir_fd, source, target)
        except FileExistsError:
            return False
        with contextlib.suppress(OSError):
            remove(dir_fd, source)
        return True


DISK = DiskWriter()
_TEMP_NAME = re.compile(r"^.+\.(?P<pid>[0-9]+)\.[0-9]+\.tmp$")


def publish_once(dir_fd: int, name: str, data: bytes, disk: DiskWriter = DISK) -> bool:
    """Publish `name` atomically; `False` when it already exists.

    The temp file is fsynced and then hard-linked into place: `link()` never replaces an existing
    name, so two writers (or a retry) can never publish one name twice.
    """
    temp = temp_name(check_name(name))
    try:
        disk.write_new(dir_fd, temp, data)
        try:
            disk.link(dir_fd, temp, name)
        except FileExistsError:
            return False
        disk.fsync_dir(dir_fd)
        return True
    finally:
        remove(dir_fd, temp)


def leftover_temp_files(dir_fd: int) -> list[tuple[str, int]]:
    """`<name>.<pid>.<ms>.tmp` entries this node's writers leave when killed, with the writer's pid."""
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return []
    found = []
    for name in names:
        match = _TEMP_NAME.match(name)
        if match is not None:
            found.append((name, int(match["pid"])))
    return found


def replace_file(dir_fd: int, name: str, data: bytes, mode: int = FILE_MODE) -> None:
    """Write-then-rename for files this node owns outright (a rename replaces a link, never follows it)."""
    temp = temp_name(check_name(name))
    try:
        write_new(dir_fd, temp, data, mode)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        remove(dir_fd, temp)
        raise


def remove(dir_fd: int, name: str) -> None:
    """Safe delete of one entry (a link is removed itself): already gone is not an error."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(check_name(name), dir_fd=dir_fd)


def remove_entry(dir_fd: int, name: str) -> None:
    """Delete a file, a link (itself) or a whole folder (whose links are removed, never followed)."""
    info = lstat_or_none(dir_fd, name)
    if info is not None and stat.S_ISDIR(info.st_mode):
        shutil.rmtree(check_name(name), dir_fd=dir_fd)
    else:
        remove(dir_fd, name)


def read_small(dir_fd: int, name: str, limit: int) -> bytes | None:
    """A regular file's bytes (at most `limit`), or `None` if missing, a link, not regular or larger."""
    try:
        fd = os.open(check_name(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def move_entry(source: int, name: str, target_dir: int, target: str) -> str | None:
    """Rename `name` to `target` in another folder (a link is moved itself, never followed); across
    filesystems a link or a regular file is copied (whole, under a temp name, durable) and then
    removed. `None` when moved, else why it was left in place."""
    try:
        os.rename(check_name(name), check_name(target), src_dir_fd=source, dst_dir_fd=target_dir)
        return None
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    info = lstat_or_none(source, name)
    if info is None:
        raise FileNotFoundError(errno.ENOENT, "withdrawn", name)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=source), target, dir_fd=target_dir)
    elif stat.S_ISREG(info.st_mode):
        _copy_regular(source, name, target_dir, target)
    else:
        return "not a regular file, on another filesystem than the state dir: not copied"
    os.unlink(name, dir_fd=source)
    return None


def _copy_regular(source: int, name: str, target_dir: int, target: str) -> None:
    """Copied under a temp name, then renamed: `target` is only ever a whole copy."""
    temp = temp_name(target)
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=source)
    try:
        dst = os.open(temp, _NEW_FILE_FLAGS, FILE_MODE, dir_fd=target_dir)
        try:
            while chunk := os.read(src, _COPY_CHUNK):
                write_all(dst, chunk)
            os.fsync(dst)
        finally:
            os.close(dst)
        os.rename(temp, target, src_dir_fd=target_dir, dst_dir_fd=target_dir)
    except BaseException:
        remove(target_dir, temp)
        raise
    finally:
        os.close(src)
