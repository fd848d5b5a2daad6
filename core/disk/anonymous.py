"""Anonymous files (`O_TMPFILE`): a response's bytes on the filesystem of its folder, with no name
until `linkat` gives it one, which never replaces an existing name. Creating one does not lock the
folder, and a killed process leaves nothing behind (`core.disk.writer.DiskWriter` stages responses so).
"""

from __future__ import annotations

import errno
import os
import resource
from dataclasses import dataclass

from core import platform
from core.disk.entries import write_all
from core.disk.tree import FILE_MODE

_FLAGS = os.O_WRONLY | platform.O_TMPFILE | os.O_CLOEXEC
_REFUSED = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT}
"""What a kernel without `O_TMPFILE` (`EISDIR`, `EINVAL`) or a filesystem without it answers."""
ANONYMOUS_MAX = min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 4)
"""Anonymous files held open at once (each is a descriptor until placed); beyond, named temps."""


@dataclass(slots=True)
class Staged:
    """A response body written and not yet visible: an anonymous file (`fd`, an `O_TMPFILE` that
    vanishes with the process) or, where none can be made, the named temp `name` beside its target."""

    name: str
    fd: int | None = None


def write_anonymous(dir_fd: int, data: bytes) -> int | None:
    """A descriptor of a new anonymous file holding `data` on `dir_fd`'s filesystem (not synced);
    `None` when the filesystem cannot make one. Only where `platform.anonymous_files()` (the caller
    looks once per process: this runs once per answer of a burst)."""
    try:
        fd = os.open(".", _FLAGS, FILE_MODE, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _REFUSED:
            return None
        raise
    try:
        written = os.write(fd, data)  # a response is small: written whole at once
        if written < len(data):
            write_all(fd, data[written:])
    except BaseException:
        os.close(fd)
        raise
    return fd


def link_anonymous(fd: int, dir_fd: int, target: str, by_descriptor: bool = True) -> bool:
    """Name the anonymous file `fd` `target` in `dir_fd`; `False` when `target` exists: nothing is ever
    replaced. By the descriptor itself where the kernel allows it (`platform.link_descriptor`) and
    `by_descriptor`, else `linkat` following only the process's own descriptor link in `/proc` (looked
    at once per process: a refusal the `/proc` link then does not share means the kernel never will)."""
    global _BY_DESCRIPTOR
    if _BY_DESCRIPTOR and by_descriptor:
        done = platform.link_descriptor(fd, dir_fd, target)
        if done is not None:
            return done
    try:
        os.link(platform.proc_fd_path(fd), target, dst_dir_fd=dir_fd, follow_symlinks=True)
    except FileExistsError:
        return False
    if _BY_DESCRIPTOR and by_descriptor:
        _BY_DESCRIPTOR = False  # refused by the descriptor and linked by path: this kernel never will
    return True


_BY_DESCRIPTOR = True
"""Whether anonymous files are still linked by their descriptor (`link_anonymous`)."""


def by_descriptor() -> bool:
    """Whether anonymous files are still linked by their descriptor (asked once per batch)."""
    return _BY_DESCRIPTOR
