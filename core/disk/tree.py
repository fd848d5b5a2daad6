"""Folders below an anchor (the forwarding root, the state dir), opened by descriptor, never through a link.

A child can plant a symbolic link anywhere below the forwarding root, and a path walked as a string
follows links at every component but the last. So every folder below an anchor is opened one
component at a time (`O_DIRECTORY | O_NOFOLLOW`, relative to its parent's descriptor), created with
`mkdirat` when missing, and files are opened, linked, renamed and removed relative to the folder's
descriptor (`core.disk.entries`). The anchor itself is the person's configuration: links in its own path are
resolved once, at first use, and its real path is then walked with `O_NOFOLLOW` like everything below it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from core import platform

log = logging.getLogger("pi_authorizer.tree")

DIR_MODE = 0o700
FILE_MODE = 0o600
_DIR_FLAGS = platform.DIR_FLAGS
_PATH_FLAGS = platform.SEARCH_FLAGS


class UnsafeFolder(OSError):
    """A folder below an anchor is a symbolic link or not a folder: never followed, never served."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(errno.ENOTDIR, f"{where} {what}")
        self.where = where
        self.what = what

    def __str__(self) -> str:
        return f"{self.where} {self.what}"


def check_name(name: str) -> str:
    """One path component, or `ValueError`: a name must never choose a path."""
    if not name or name in {".", ".."} or "/" in name or "\x00" in name:
        raise ValueError(f"{name!r} cannot name an entry of a folder")
    return name


def open_dir(base_fd: int, parts: Sequence[str], create: bool = False, shown: str = "") -> int:
    """A new descriptor for `base_fd/parts...`, opened one component at a time, never through a link.

    Missing folders are created (mode 0700) when `create`, else `FileNotFoundError`. The first
    component that is a link or not a folder raises `UnsafeFolder`, named `shown/parts...`.
    """
    return _walk(os.open(".", _DIR_FLAGS, dir_fd=base_fd), parts, create, _named_under(shown))


def _named_under(shown: str) -> Callable[[list[str]], str]:
    """Names a refused folder `shown/part/part...` (the parts walked so far)."""
    return lambda walked: "/".join([shown, *walked] if shown else walked)


def _walk(
    current: int, parts: Sequence[str], create: bool, where: Callable[[list[str]], str],
    flags: int = _DIR_FLAGS,
) -> int:
    """Descend from `current` (owned: closed on the way) to `parts`; returns the last folder's descriptor.
    A refusal is named `where(parts walked so far)`."""
    walked: list[str] = []
    try:
        for part in parts:
            walked.append(check_name(part))
            child = _open_child(current, part, create, where(walked), flags)
            os.close(current)
            current = child
    except BaseException:
        os.close(current)
        raise
    return current


def _open_child(parent: int, name: str, create: bool, where: str, flags: int = _DIR_FLAGS) -> int:
    for _ in range(3):
        try:
            return os.open(name, flags, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise FileNotFoundError(errno.ENOENT, "no such folder", where) from None
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, DIR_MODE, dir_fd=parent)
        except OSError as exc:
            if exc.errno in {errno.ENOTDIR, errno.ELOOP}:
                raise UnsafeFolder(where, describe_entry(parent, name)) from None
            raise
    raise FileNotFoundError(errno.ENOENT, "folder kept vanishing while being created", where)


def describe_entry(dir_fd: int, name: str) -> str:
    """Why an entry that should be a folder is refused."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return "changed while being opened"
    if stat.S_ISLNK(mode):
        return "is a symbolic link (never followed)"
    return "is not a folder"


def lstat_or_none(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(check_name(name), dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def require_folder_or_absent(dir_fd: int, name: str, where: str) -> None:
    """`UnsafeFolder` unless `name` is a real folder or missing (checked without following it)."""
    info = lstat_or_none(dir_fd, name)
    if info is not None and not stat.S_ISDIR(info.st_mode):
        raise UnsafeFolder(where, describe_entry(dir_fd, name))


class Anchor:
    """A folder the person configured (forwarding root, state dir), resolved once, then walked by descriptor.

    Links in the configured path (`/home -> /data/home`) are the person's choice and are followed
    once, at first use; the resolved real path is logged when it differs. Afterwards the real path is
    walked with `O_NOFOLLOW` at every component: if the anchored folder is removed it is re-opened
    (and re-created when writing) along that same real path, and a link appearing on it later is
    refused (`UnsafeFolder`), never followed.
    """

    def __init__(self, path: Path, label: str) -> None:
        self.path = path
        self.label = label
        self._real: str | None = None
        self._held: list[int] = []
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._held)

    @property
    def real(self) -> str | None:
        """The resolved real path, once the anchor has been used."""
        return self._real

    def open(self, parts: Sequence[str] = (), create: bool = False) -> int:
        """A new descriptor for `anchor/parts...` (see `open_dir`); the caller closes it."""
        shown = str(self.path)
        with self._lock:  # a re-anchor cannot close the descriptor while it is being used
            anchor = self._anchor_fd(create)
            if not parts:
                return os.open(".", _DIR_FLAGS, dir_fd=anchor)
            first = _open_child(anchor, check_name(parts[0]), create, f"{shown}/{parts[0]}")
        return _walk(first, parts[1:], create, _named_under(f"{shown}/{parts[0]}"))

    @contextlib.contextmanager
    def folder(self, parts: Sequence[str] = (), create: bool = False) -> Iterator[int]:
        fd = self.open(parts, create)
        try:
            yield fd
        finally:
            os.close(fd)

    def close(self) -> None:
        """Let go of the anchor's descriptor (a later use re-opens it along the same real path)."""
        with self._lock:
            _close_all(self._held)

    def _anchor_fd(self, create: bool) -> int:
        """The anchored folder's `O_PATH` descriptor (called with `_lock` held)."""
        if self._held:
            if os.fstat(self._held[0]).st_nlink > 0:
                return self._held[0]
            _close_all(self._held)  # removed: re-open along the same real path
            log.warning("%s %s was removed; re-opening it", self.label, self._real)
        if self._real is None:
            if create:
                os.makedirs(self.path, DIR_MODE, exist_ok=True)
            elif not self.path.is_dir():
                raise FileNotFoundError(errno.ENOENT, "no such folder", str(self.path))
            real = os.path.realpath(self.path)
            if real != os.path.abspath(self.path):
                log.info("%s %s resolves to %s through a link in its path (resolved once)",
                         self.label, self.path, real)
            self._real = real
        self._held.append(_open_real_path(self._real, create, self.label))
        return self._held[0]


def _open_real_path(real: str, create: bool, label: str) -> int:
    """Walk an absolute real path from `/` with `O_PATH | O_NOFOLLOW` (search permission suffices).

    Without `O_PATH` (macOS) each folder on the way is opened for reading; where one above the anchor
    may be searched but not read (a `0711` home's parent), the real path is opened whole instead,
    its last component never through a link (the path above the anchor is the person's own)."""

    def where(walked: list[str]) -> str:
        return f"{label} {real}: {walked[-1] if walked else '/'}"

    try:
        return _walk(os.open("/", _PATH_FLAGS), Path(real).parts[1:], create, where, _PATH_FLAGS)
    except PermissionError:
        if platform.O_PATH:
            raise
    try:
        return os.open(real, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in {errno.ENOTDIR, errno.ELOOP}:
            raise UnsafeFolder(f"{label} {real}", "is a symbolic link (never followed)") from None
        raise


def _close_all(held: list[int]) -> None:
    while held:
        with contextlib.suppress(OSError):
            os.close(held.pop())
