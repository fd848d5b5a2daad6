"""The `DiskWriter` seam: every file-system call that publishes a response (staging, syncing,
placing), relative to a folder's descriptor and never through a link, so a fault test subclasses
one class instead of patching; the primitives it wraps are `core.disk.entries` and `core.disk.anonymous`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Callable, Sequence

from core import platform
from core.disk import anonymous
from core.disk.anonymous import ANONYMOUS_MAX, Staged, link_anonymous, write_anonymous
from core.disk.entries import remove, replace_file, temp_name, write_new
from core.disk.tree import check_name


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
    #: An anonymous file linked by its descriptor where the kernel allows it, else through `/proc`.
    by_descriptor = True
    anonymous_max = ANONYMOUS_MAX
    _held = 0  # staged anonymous files this writer holds open
    _lock = threading.Lock()
    _usable: bool | None = None  # whether /proc names descriptors, checked once per process

    def stage(self, dir_fd: int, name: str, data: bytes, sync: bool) -> Staged:
        """`data` in a file that is not visible yet; durable on return when `sync` (else `sync_all`
        or `sync_file` makes it so before it is placed). Called once per answer of a burst: the
        anonymous file's checks are inline."""
        usable = DiskWriter._usable
        if usable is None:
            usable = DiskWriter._usable = platform.anonymous_files()
        fd = None
        if usable and self.anonymous:
            lock = DiskWriter._lock  # `acquire`/`release`: half the cost of `with` (per answer)
            lock.acquire()
            held = self._held < self.anonymous_max
            if held:
                self._held += 1
            lock.release()
            if held:
                try:
                    fd = write_anonymous(dir_fd, data)
                finally:
                    if fd is None:
                        self._let_go()
        if fd is None:
            if sync:
                self.write_new(dir_fd, name, data)
            else:
                self.write_unsynced(dir_fd, name, data)
            return Staged(name)
        staged = Staged(name, fd)
        if sync:
            try:
                platform.full_fsync(fd)
            except BaseException:
                self.discard(dir_fd, staged)
                raise
        return staged

    def stage_batch(self, dir_fd: int, bodies: Sequence[bytes]) -> list[Staged | None]:
        """`stage` of a batch's bodies, none synced (`sync_all` makes them durable together), as
        anonymous files in one loop with one count of the held ones: a burst stages a thousand at
        once. None for a body not staged here (past the held limit, refused by the filesystem, a
        failure: `stage` then stages it alone, and says why), and for every body when this writer's
        `stage` is its own (a fault test's: each file goes through it)."""
        made: list[Staged | None] = [None] * len(bodies)
        if type(self).stage is not DiskWriter.stage or not self.anonymous:
            return made
        usable = DiskWriter._usable
        if usable is None:
            usable = DiskWriter._usable = platform.anonymous_files()
        if not usable:
            return made
        with DiskWriter._lock:
            room = min(len(bodies), self.anonymous_max - self._held)
            if room <= 0:
                return made
            self._held += room
        count = 0
        try:
            for data in bodies[:room]:
                fd = write_anonymous(dir_fd, data)
                if fd is None:
                    break
                made[count] = Staged("", fd)  # no name: an anonymous file is placed by its descriptor
                count += 1
        except OSError:
            pass  # the rest are staged one by one, each saying what failed
        except BaseException:
            for staged in made[:count]:
                assert staged is not None and staged.fd is not None
                os.close(staged.fd)
            count = 0
            raise
        finally:
            if count < room:
                with DiskWriter._lock:
                    self._held -= room - count
        return made

    def _let_go(self) -> None:
        with DiskWriter._lock:
            self._held -= 1

    def sync_file(self, dir_fd: int, staged: Staged) -> None:
        """Make one staged file durable (a batch too small for `sync_all`, or where it is missing)."""
        if staged.fd is not None:
            platform.full_fsync(staged.fd)
            return
        fd = os.open(check_name(staged.name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            platform.full_fsync(fd)
        finally:
            os.close(fd)

    def place(self, dir_fd: int, staged: Staged, target: str) -> bool:
        """Give the durable `staged` file the name `target` unless it exists (`False` then: it is
        still staged, the caller discards it); never replaces. On `True` nothing staged is left."""
        fd = staged.fd
        if fd is None:
            return self.place_named(dir_fd, staged.name, target)
        if not link_anonymous(fd, dir_fd, check_name(target), self.by_descriptor):
            return False
        staged.fd = None  # named now: the descriptor is let go as `discard` would (inline: per answer)
        try:  # noqa: SIM105 (`contextlib.suppress` costs 0.4 µs: per answer)
            os.close(fd)
        except OSError:
            pass
        lock = DiskWriter._lock
        lock.acquire()
        self._held -= 1
        lock.release()
        return True

    def place_batch(
        self, dir_fd: int, staged: Sequence[Staged], targets: Sequence[str]
    ) -> list[bool | Exception]:
        """`place` of a batch's files in one loop (the descriptors linked let go with one count): for
        each, True when placed, False when its target exists (it is still staged), else what failed.
        A writer whose `place` is its own (a fault test's) is asked file by file."""
        results: list[bool | Exception] = []
        if type(self).place is not DiskWriter.place:
            for one, target in zip(staged, targets, strict=True):
                try:
                    results.append(self.place(dir_fd, one, target))
                except Exception as exc:
                    results.append(exc)
            return results
        let_go = 0
        # By the descriptor, the usual case, without `link_anonymous`'s call per file; a refusal (None)
        # goes through it, which links through `/proc` (and stops asking the kernel, if it must).
        by_descriptor = self.by_descriptor and anonymous.by_descriptor()
        link = platform.link_descriptor
        try:
            for one, target in zip(staged, targets, strict=True):
                fd = one.fd
                try:
                    if fd is None:
                        results.append(self.place_named(dir_fd, one.name, target))
                        continue
                    name = check_name(target)
                    done = link(fd, dir_fd, name) if by_descriptor else None
                    if done is None:
                        done = link_anonymous(fd, dir_fd, name, self.by_descriptor)
                        by_descriptor = by_descriptor and anonymous.by_descriptor()
                    if not done:
                        results.append(False)
                        continue
                except Exception as exc:
                    results.append(exc)
                    continue
                one.fd = None  # named now: its descriptor let go as `discard` would
                let_go += 1
                try:  # noqa: SIM105 (`contextlib.suppress` costs 0.4 µs: per answer)
                    os.close(fd)
                except OSError:
                    pass
                results.append(True)
        finally:
            if let_go:
                with DiskWriter._lock:
                    self._held -= let_go
        return results

    def remove_request(self, dir_fd: int, name: str) -> None:
        """Remove an answered request (never through a link); `FileNotFoundError` when it is gone."""
        os.unlink(check_name(name), dir_fd=dir_fd)

    def remove_requests(
        self, dir_fd: int, names: Sequence[str]
    ) -> tuple[list[str], list[tuple[str, OSError]]]:
        """`remove_request` of each name in one loop (a burst removes a thousand at once): the names
        gone (removed, or by its child already), and those that stay with what failed. A writer whose
        `remove_request` is its own (a fault test's) is asked name by name."""
        own = type(self).remove_request is not DiskWriter.remove_request
        remove_one, unlink = self.remove_request, os.unlink
        gone: list[str] = []
        failed: list[tuple[str, OSError]] = []
        for name in names:
            try:
                if own:
                    remove_one(dir_fd, name)
                else:
                    unlink(check_name(name), dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                failed.append((name, exc))
                continue
            gone.append(name)
        return gone, failed

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

    def replace(self, dir_fd: int, name: str, data: bytes) -> None:
        """A file this node owns outright (a heartbeat) written anew and renamed over `name`."""
        replace_file(dir_fd, name, data)

    def overwrite(self, dir_fd: int, name: str, data: bytes) -> bool:
        """Rewrite the regular file `name` (this user's, one name, exactly `len(data)` bytes long) in
        place: no new block or inode is needed, so it works on a full disk. `False`, having written
        nothing, where it cannot (missing, a link, another size or owner)."""
        try:
            fd = os.open(check_name(name), os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO, errno.EISDIR):
                return False
            raise
        try:
            info = os.fstat(fd)
            if (not stat.S_ISREG(info.st_mode) or info.st_size != len(data) or info.st_nlink != 1
                    or info.st_uid != os.getuid()):
                return False
            view, offset = memoryview(data), 0
            while offset < len(data):
                offset += os.pwrite(fd, view[offset:], offset)
            return True
        finally:
            os.close(fd)

    def fsync_dir(self, dir_fd: int) -> None:
        platform.full_fsync(dir_fd)

    def write_unsynced(self, dir_fd: int, name: str, data: bytes) -> None:
        """`write_new` without the fsync: a batch makes all its files durable at once (`sync_all`)."""
        write_new(dir_fd, name, data, sync=False)

    def sync_all(self, dir_fd: int) -> bool:
        """Make every file written on `dir_fd`'s filesystem durable (`syncfs`); `False` if unavailable."""
        return platform.syncfs(dir_fd)

    def rename_noreplace(self, dir_fd: int, source: str, target: str) -> bool | None:
        """Rename within one folder unless `target` exists (`core.platform.rename_noreplace`; a test
        seam: `None` stands for a system or filesystem without it)."""
        return platform.rename_noreplace(dir_fd, check_name(source), check_name(target))

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


class RequestGone(Exception):
    """The request a response answers was gone just before the response would be placed: its child
    stopped waiting, so nothing was placed (`publish_once`'s `awaited`)."""


def publish_once(
    dir_fd: int, name: str, data: bytes, disk: DiskWriter = DISK, awaited: Callable[[], bool] | None = None
) -> bool:
    """Publish `name` atomically; `False` when it already exists.

    The temp file is fsynced and then hard-linked into place: `link()` never replaces an existing
    name, so two writers (or a retry) can never publish one name twice. `awaited`, looked at just
    before the link: False raises `RequestGone` and nothing is placed.
    """
    temp = temp_name(check_name(name))
    try:
        disk.write_new(dir_fd, temp, data)
        if awaited is not None and not awaited():
            raise RequestGone(name)
        try:
            disk.link(dir_fd, temp, name)
        except FileExistsError:
            return False
        disk.fsync_dir(dir_fd)
        return True
    finally:
        remove(dir_fd, temp)
