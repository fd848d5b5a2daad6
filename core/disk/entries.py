"""Entries of a folder opened by descriptor (`core.disk.tree`): written, published, replaced, read and
removed relative to that descriptor, never through a link.

The seam every response goes through (staging, syncing, placing) is `core.disk.writer`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat

from core import platform
from core.clock import SYSTEM_CLOCK, wall_ms
from core.disk.tree import FILE_MODE, check_name, lstat_or_none

_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_COPY_CHUNK = 1 << 20


#: The longest name of one directory entry (bytes), on Linux filesystems.
NAME_MAX = 255


def temp_suffix() -> str:
    """`.<pid>.<ms>.tmp`, the end of a temp name made now (one for a whole batch of them)."""
    return f".{os.getpid()}.{wall_ms(SYSTEM_CLOCK)}.tmp"


def temp_name(name: str, suffix: str | None = None) -> str:
    """`<name>.<pid>.<ms>.tmp`, the reference's temp naming (skipped by every `.json` lister), with the
    `suffix` given (`temp_suffix`) or one made now. A name too long for that within `NAME_MAX` bytes
    keeps its start and a digest of the whole name (`<start>~<digest>.<pid>.<ms>.tmp`): a request of
    any legal name length can be answered."""
    if suffix is None:
        suffix = temp_suffix()
    if name.isascii() and len(name) + len(suffix) <= NAME_MAX:
        return f"{name}{suffix}"  # a byte per character: nothing to encode
    encoded = os.fsencode(name)
    if len(encoded) + len(suffix) <= NAME_MAX:
        return f"{name}{suffix}"
    digest = "~" + hashlib.sha256(encoded).hexdigest()[:16]
    start = encoded[: NAME_MAX - len(suffix) - len(digest)]
    return f"{os.fsdecode(start)}{digest}{suffix}"


def write_new(dir_fd: int, name: str, data: bytes, mode: int = FILE_MODE, sync: bool = True) -> None:
    """Create `name` exclusively (never through a link) and, unless told the caller syncs, make it durable."""
    fd = os.open(check_name(name), _NEW_FILE_FLAGS, mode, dir_fd=dir_fd)
    try:
        write_all(fd, data)
        if sync:
            platform.full_fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` (`os.write` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_TEMP_NAME = re.compile(r"^(?P<target>.+)\.(?P<pid>[0-9]+)\.[0-9]+\.tmp$")


def temp_writer(name: str) -> int | None:
    """The pid in a temp name (`<name>.<pid>.<ms>.tmp`, the reference's and this node's), else None."""
    match = _TEMP_NAME.match(name)
    return None if match is None else int(match["pid"])


def temp_target(name: str) -> str | None:
    """The name a temp (`<name>.<pid>.<ms>.tmp`) is written for, else None: which answer it replaces."""
    match = _TEMP_NAME.match(name)
    return None if match is None else match["target"]


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
        remove_tree(dir_fd, check_name(name))
    else:
        remove(dir_fd, name)


_TREE_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(dir_fd: int, name: str) -> None:
    """Delete the folder `name` and all it holds, iteratively (a tree 100,000 deep never recurses,
    unlike `shutil.rmtree`, which raised `RecursionError` on a 1,000-deep one: issue 34 finding 6)
    with two descriptors open at a time. Links are removed, never followed; going back up through
    `..` is checked against the folder that was come down from, and anything else is refused."""
    parents: list[tuple[int, int]] = []  # (st_dev, st_ino) of each folder above the current one
    names = [name]
    top = os.fstat(dir_fd)
    current = os.open(name, _TREE_FLAGS, dir_fd=dir_fd)
    parents.append((top.st_dev, top.st_ino))
    try:
        while True:
            deeper = None
            for entry in os.listdir(current):
                info = lstat_or_none(current, entry)
                if info is not None and stat.S_ISDIR(info.st_mode):
                    deeper = entry
                    break
                remove(current, entry)
            if deeper is not None:
                here = os.fstat(current)
                below = os.open(deeper, _TREE_FLAGS, dir_fd=current)
                os.close(current)
                current = below
                parents.append((here.st_dev, here.st_ino))
                names.append(deeper)
                continue
            if len(names) == 1:
                os.close(current)
                current = -1
                os.rmdir(name, dir_fd=dir_fd)
                return
            up = os.open("..", _TREE_FLAGS, dir_fd=current)
            seen = os.fstat(up)
            os.close(current)
            current = up
            if (seen.st_dev, seen.st_ino) != parents.pop():
                raise OSError(errno.EXDEV, "the folder moved while it was being removed", names[-1])
            os.rmdir(names.pop(), dir_fd=current)
    finally:
        if current >= 0:
            os.close(current)


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
            platform.full_fsync(dst)
        finally:
            os.close(dst)
        os.rename(temp, target, src_dir_fd=target_dir, dst_dir_fd=target_dir)
    except BaseException:
        remove(target_dir, temp)
        raise
    finally:
        os.close(src)
