"""A burst's answers written into their own request files, which are then linked as the responses.

Why: on a filesystem that has just deleted many files, creating one costs hundreds of microseconds
of kernel time (ext4 without a journal skips every inode freed in the last 30 s, reading each), and
a burst of 10,000 asks both creates 10,000 responses and deletes 10,000 requests. A request file
that is rewritten and linked as `responses/<id>.json` creates no inode, and its later removal from
`requests/` frees none (`docs/serving-speed.md`).

Only once the verdict is durably recorded (a restart finds the request holding its response's bytes
and publishes what the history holds: `core.serving.reconcile`), and only a file this node could
have written itself with nothing else at stake: a regular file, owned by this user, with no other
name (never a hard link to some other file), on the filesystem of `responses/`, holding exactly the
bytes that were judged (never a request replaced since).
"""

from __future__ import annotations

import os
import stat

from core.disk.tree import FILE_MODE

_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def reuse_request(
    requests_fd: int, name: str, judged: bytes, body: bytes, responses_fd: int, target: str, device: int
) -> int | None:
    """A descriptor of `requests/<name>` now holding `body` (not synced, mode `FILE_MODE`), to be
    linked as `target` in `responses_fd` (on `device`); or None, having changed nothing, when the
    file may not be reused (see the module docstring) or `target` already exists (it could not be
    placed)."""
    try:
        os.stat(target, dir_fd=responses_fd, follow_symlinks=False)
        return None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(name, _FLAGS, dir_fd=requests_fd)
    except OSError:
        return None  # gone, a link, not writable, busy: a new file is made instead
    try:
        info = os.fstat(fd)
        if not reusable(info, len(judged), device) or os.pread(fd, len(judged) + 1, 0) != judged:
            os.close(fd)
            return None
        # Written before the old bytes are cut (a truncation to zero would make ext4 write the file
        # out when it is closed): a file stopped halfway starts with `body` all the same.
        view, offset = memoryview(body), 0
        while offset < len(body):
            offset += os.pwrite(fd, view[offset:], offset)
        if info.st_size > len(body):
            os.ftruncate(fd, len(body))
        if stat.S_IMODE(info.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def reusable(info: os.stat_result, size: int, device: int) -> bool:
    """A regular file of `size` bytes, this user's, with one name, on `device`."""
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_nlink == 1
        and info.st_uid == os.geteuid()
        and info.st_dev == device
        and info.st_size == size
    )
