"""Secrets read from files (an API key, a broker password or access file, a node's signing key): one
check for all of them, so what counts as private is decided in one place. The file is opened without
following a link and checked on its descriptor (no swap between the look and the read): a regular file
of this user that neither group nor others may read, and small."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotPrivate(ValueError):
    """The file cannot hold a secret: the message names the path and why (never its contents)."""


def read_private(path: Path, what: str, limit: int) -> bytes:
    """The bytes of `path` (`what` names it in a refusal), refused unless it is a private, small,
    regular file of this user."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise NotPrivate(f"{path}: the {what} cannot be opened ({why})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotPrivate(f"{path}: the {what} is not a regular file")
        if info.st_uid != os.getuid():
            raise NotPrivate(f"{path}: the {what} is owned by another user")
        if info.st_mode & 0o077:
            raise NotPrivate(f"{path}: the {what} holds a secret but is readable by others (group or "
                             f"others may read it; chmod 600 {path})")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotPrivate(f"{path}: the {what} is over {limit} bytes")
    return data
