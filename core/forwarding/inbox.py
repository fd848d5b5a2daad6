"""One session's forwarding inbox on disk: listing, hostile-safe reading, atomic answering.

Every operation assumes the inbox may hold anything a local process could put there: symlinks
(never followed, at any level: every folder is opened by descriptor through `core.disk.tree`), FIFOs,
huge files, names that are not UTF-8. Nothing is deleted without either answering it or keeping a
copy with the reason (`core.serving.quarantine`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field
from functools import cached_property
from pathlib import Path

from core.disk.entries import read_small, remove
from core.disk.paths import encode_session_id, normalize_session_id
from core.disk.tree import Anchor, UnsafeFolder, lstat_or_none, require_folder_or_absent
from core.disk.writer import DISK, DiskWriter, publish_once
from core.wire.limits import MAX_REQUEST_BYTES

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnreadableRequest(Exception):
    """The request file exists but cannot be taken as a request; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def display_name(name: str) -> str:
    """A file name safe to print: undecodable bytes and controls are escaped."""
    return os.fsencode(name).decode("utf-8", "backslashreplace").encode("unicode_escape").decode("ascii")


#: Which file a name held when it was read: inode, size, modification time. Another file renamed
#: over the name (or the file rewritten) has another identity: the ask read from it is not that file's.
FileIdentity = tuple[int, int, int]


def identity_of(info: os.stat_result) -> FileIdentity:
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def read_request_in(dir_fd: int, name: str) -> bytes:
    """The bytes of request file `name` in the folder `dir_fd`, never following a symlink or blocking
    on a FIFO. Raises `FileNotFoundError` when the child withdrew it, `UnreadableRequest` otherwise."""
    return read_request_identified(dir_fd, name)[0]


def read_request_identified(dir_fd: int, name: str) -> tuple[bytes, FileIdentity]:
    """`read_request_in`, with the identity of the very file read (from its open descriptor)."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, "request withdrawn", name) from exc
        if exc.errno == errno.ELOOP:
            raise UnreadableRequest("is a symbolic link (never followed)") from exc
        raise UnreadableRequest(f"cannot be opened: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableRequest("is not a regular file")
        size = info.st_size
        if size > MAX_REQUEST_BYTES:
            raise UnreadableRequest(f"is {size} bytes, over the {MAX_REQUEST_BYTES}-byte limit")
        data = os.read(fd, size + 1)  # a byte more than its size: one that grew since is seen growing
        if len(data) == size:
            # Read whole, as it was when looked at: the identity of that look (a change after it gives
            # the name another identity, so the file is read again). `identity_of(info)`, in place.
            return data, (info.st_ino, size, info.st_mtime_ns)
        data = _read_on(fd, data, size)
        return data, identity_of(os.fstat(fd))
    finally:
        os.close(fd)


def _read_on(fd: int, first: bytes, size: int) -> bytes:
    """The rest of a file that changed while it was read (`first` read so far; `size` at its open),
    to its end or past the limit."""
    chunks = [first]
    read = len(first)
    while first and read <= MAX_REQUEST_BYTES:
        asked = min(MAX_REQUEST_BYTES + 1 - read, 1 << 16)
        chunk = os.read(fd, asked)
        if not chunk:
            break
        chunks.append(chunk)
        read += len(chunk)
        if len(chunk) < asked and read >= size:
            break  # a regular file read short once its size at open is read: at its end (no 0-byte read)
    data = b"".join(chunks)
    if len(data) > MAX_REQUEST_BYTES:
        raise UnreadableRequest(f"grew over the {MAX_REQUEST_BYTES}-byte limit")
    return data


@dataclass(frozen=True)
class SessionInbox:
    """`<root>/sessions/<enc(id)>/{requests,responses}` for one served session.

    The `Path` properties are for display; every operation walks the folders from the root by
    descriptor (`tree`, shared by every inbox of one serving core) and raises `UnsafeFolder` when
    a folder of this session's tree is a link or not a folder.
    """

    root: Path
    session_id: str
    anchor: InitVar[Anchor | None] = None
    writer: DiskWriter = field(default=DISK, compare=False, repr=False)
    tree: Anchor = field(init=False, compare=False, repr=False)

    def __post_init__(self, anchor: Anchor | None) -> None:
        object.__setattr__(self, "session_id", normalize_session_id(self.session_id))
        object.__setattr__(self, "tree", anchor or Anchor(self.root, "forwarding root"))

    @cached_property
    def folder_name(self) -> str:
        """The session's folder under `sessions/`, encoded once (every file operation of the inbox
        walks through it: a burst asked for it twice per ask)."""
        return encode_session_id(self.session_id)

    @property
    def session_dir(self) -> Path:
        return self.root / "sessions" / self.folder_name

    @property
    def requests_dir(self) -> Path:
        return self.session_dir / "requests"

    @property
    def responses_dir(self) -> Path:
        return self.session_dir / "responses"

    @contextmanager
    def folder(self, sub: str, create: bool = False) -> Iterator[int]:
        """A descriptor for `requests` or `responses` of this session, opened from the root down."""
        with self.tree.folder(("sessions", self.folder_name, sub), create) as fd:
            yield fd

    def list_request_names(self) -> list[str]:
        """`listed_requests`, empty when the inbox does not exist."""
        return self.listed_requests() or []

    def listed_requests(self) -> list[str] | None:
        """Names ending in `.json`, sorted like the reference (temp files end in `.tmp`); None when the
        session folder or `requests/` does not exist: a folder moved away (and back) says nothing of
        the files it holds, so serving withdraws no ask for it (`core.serving.drain`).

        Raises `UnsafeFolder` when the session folder, `requests/` or `responses/` is a link or not
        a folder: such a session is not served until the person removes it.
        """
        try:
            with self.tree.folder(("sessions", self.folder_name)) as session_fd:
                require_folder_or_absent(session_fd, "responses", str(self.responses_dir))
            with self.folder("requests") as fd:
                names = os.listdir(fd)
        except FileNotFoundError:
            return None
        return sorted(name for name in names if name.endswith(".json"))

    def listable(self) -> bool:
        """Whether `requests/` can be listed now: it exists, and no folder on its way is refused."""
        try:
            return self.listed_requests() is not None
        except UnsafeFolder:
            return False

    def read_request(self, name: str) -> bytes:
        """The file's bytes, never following a symlink or blocking on a FIFO (see `read_request_in`)."""
        with self.folder("requests") as dir_fd:
            try:
                return read_request_in(dir_fd, name)
            except FileNotFoundError as exc:
                raise FileNotFoundError(self.requests_dir / name) from exc

    def identities(self, names: Iterable[str]) -> dict[str, FileIdentity | None]:
        """The identity each named request file has now (None: gone, or not a regular file), through
        one descriptor of `requests/`, never following a link."""
        found: dict[str, FileIdentity | None] = {}
        try:
            with self.folder("requests") as fd:
                for name in names:
                    info = lstat_or_none(fd, name)
                    regular = info is not None and stat.S_ISREG(info.st_mode)
                    found[name] = identity_of(info) if info is not None and regular else None
        except FileNotFoundError:
            return dict.fromkeys(names)
        return found

    def has_request(self, name: str) -> bool:
        """Whether `requests/<name>` is still there (its child has not withdrawn it)."""
        try:
            with self.folder("requests") as fd:
                return lstat_or_none(fd, name) is not None
        except FileNotFoundError:
            return False

    def response_path(self, request_id: str) -> Path:
        return self.responses_dir / f"{request_id}.json"

    def has_response(self, request_id: str) -> bool:
        try:
            with self.folder("responses") as fd:
                return lstat_or_none(fd, f"{request_id}.json") is not None
        except FileNotFoundError:
            return False

    def list_response_names(self) -> list[str]:
        """Every name in `responses/` (read by descriptor); empty when it does not exist."""
        try:
            with self.folder("responses") as fd:
                return os.listdir(fd)
        except FileNotFoundError:
            return []

    def response_is(self, request_id: str, body: bytes, or_cut_short: bool = False) -> bool:
        """Whether `responses/<id>.json` is a regular file holding exactly `body` (never through a
        link): delivery verified, not assumed. False when it is missing, unreadable or other. With
        `or_cut_short`, also a start of `body` (then nothing, or NUL bytes): what a power cut leaves of
        a response written after its verdict was durable and not flushed itself
        (docs/design/reliability.md)."""
        try:
            with self.folder("responses") as fd:
                held = read_small(fd, f"{request_id}.json", len(body))
        except (OSError, ValueError):
            return False
        if held is None or held == body:
            return held == body
        return or_cut_short and body.startswith(held.rstrip(b"\0"))

    def peek_response(self, request_id: str, limit: int = 400) -> bytes:
        """The start of `responses/<id>.json` for a report, never through a link; empty when unreadable."""
        try:
            with self.folder("responses") as dir_fd:
                fd = os.open(f"{request_id}.json", _READ_FLAGS, dir_fd=dir_fd)
        except (OSError, ValueError):
            return b""
        try:
            return os.read(fd, limit)
        except OSError:
            return b""
        finally:
            os.close(fd)

    def write_response(self, request_id: str, body: bytes, awaited: str | None = None) -> bool:
        """Publish `responses/<id>.json` atomically; `False` when a response already exists.

        Missing folders are created from the root down (mode 0700, never through a link); the
        temp file is fsynced and hard-linked into place, so nothing is ever answered twice.
        `awaited`: the request file it answers, looked for just before the link (`RequestGone` when
        it is gone: its child stopped waiting, and nothing is placed).
        """
        if "/" in request_id or request_id in {"", ".", ".."} or "\x00" in request_id:
            raise ValueError(f"request id {request_id!r} cannot name a response file")
        still = None if awaited is None else (lambda: self.has_request(awaited))
        with self.folder("responses", create=True) as fd:
            return publish_once(fd, f"{request_id}.json", body, self.writer, still)


    def delete_request(self, name: str) -> None:
        """Safe delete: a child that already removed it is not an error."""
        try:
            with self.folder("requests") as fd:
                remove(fd, name)
        except FileNotFoundError:
            return
