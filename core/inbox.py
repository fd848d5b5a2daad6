"""One session's forwarding inbox on disk: listing, hostile-safe reading, atomic answering, quarantine.

Every operation assumes the inbox may hold anything a local process could put there: symlinks
(never followed), FIFOs, huge files, names that are not UTF-8. Nothing is deleted without either
answering it or keeping a copy with the reason.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from core.paths import encode_session_id, normalize_session_id
from core.wire import MAX_REQUEST_BYTES, compact_json

DIR_MODE = 0o700
FILE_MODE = 0o600
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnreadableRequest(Exception):
    """The request file exists but cannot be taken as a request; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def ensure_dir(path: Path) -> None:
    """`mkdir -p` with owner-only modes for the folders this node creates."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new_file(path: Path, data: bytes) -> None:
    """Create `path` exclusively with mode 0600 and make its bytes durable."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_name_for(target: Path) -> Path:
    """`<target>.<pid>.<ms>.tmp`, the reference's temp naming (skipped by every `.json` lister)."""
    return target.with_name(f"{target.name}.{os.getpid()}.{time.time_ns() // 1_000_000}.tmp")


def replace_atomically(target: Path, data: bytes) -> None:
    """Write-then-rename for files this node owns outright (the heartbeat)."""
    temp = temp_name_for(target)
    try:
        write_new_file(temp, data)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


class DiskWriter:
    """The file-system calls that publish a response. An explicit seam: fault tests inject a writer
    that fails like a full or broken disk (ENOSPC, EIO) without patching this module."""

    def write_new_file(self, path: Path, data: bytes) -> None:
        write_new_file(path, data)

    def link(self, source: Path, target: Path) -> None:
        os.link(source, target, follow_symlinks=False)

    def fsync_dir(self, path: Path) -> None:
        fsync_dir(path)


DISK = DiskWriter()
_TEMP_NAME = re.compile(r"^.+\.(?P<pid>[0-9]+)\.[0-9]+\.tmp$")


def leftover_temp_files(folder: Path) -> list[tuple[Path, int]]:
    """`<name>.<pid>.<ms>.tmp` files this node's writers leave when killed, with the writer's pid."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = []
    for name in names:
        match = _TEMP_NAME.match(name)
        if match is not None:
            found.append((folder / name, int(match["pid"])))
    return found


def display_name(name: str) -> str:
    """A file name safe to print: undecodable bytes and controls are escaped."""
    return os.fsencode(name).decode("utf-8", "backslashreplace").encode("unicode_escape").decode("ascii")


@dataclass(frozen=True)
class SessionInbox:
    """`<root>/sessions/<enc(id)>/{requests,responses}` for one served session."""

    root: Path
    session_id: str
    writer: DiskWriter = DISK

    def __post_init__(self) -> None:
        object.__setattr__(self, "session_id", normalize_session_id(self.session_id))

    @property
    def folder_name(self) -> str:
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

    def list_request_names(self) -> list[str]:
        """Names ending in `.json`, sorted like the reference (temp files end in `.tmp`)."""
        try:
            names = os.listdir(self.requests_dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(name for name in names if name.endswith(".json"))

    def read_request(self, name: str) -> bytes:
        """The file's bytes, never following a symlink or blocking on a FIFO.

        Raises `FileNotFoundError` when the child withdrew it, `UnreadableRequest` otherwise.
        """
        path = self.requests_dir / name
        try:
            fd = os.open(path, _READ_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise FileNotFoundError(path) from exc
            if exc.errno == errno.ELOOP:
                raise UnreadableRequest("is a symbolic link (never followed)") from exc
            raise UnreadableRequest(f"cannot be opened: {exc.strerror}") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnreadableRequest("is not a regular file")
            if info.st_size > MAX_REQUEST_BYTES:
                raise UnreadableRequest(f"is {info.st_size} bytes, over the {MAX_REQUEST_BYTES}-byte limit")
            chunks: list[bytes] = []
            remaining = MAX_REQUEST_BYTES + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            data = b"".join(chunks)
            if len(data) > MAX_REQUEST_BYTES:
                raise UnreadableRequest(f"grew over the {MAX_REQUEST_BYTES}-byte limit")
            return data
        finally:
            os.close(fd)

    def response_path(self, request_id: str) -> Path:
        return self.responses_dir / f"{request_id}.json"

    def has_response(self, request_id: str) -> bool:
        return os.path.lexists(self.response_path(request_id))

    def write_response(self, request_id: str, body: bytes) -> bool:
        """Publish `responses/<id>.json` atomically; `False` when a response already exists.

        The temp file is fsynced and then hard-linked into place: `link()` never replaces an
        existing name, so two writers (or a retry) can never answer one request twice.
        """
        if "/" in request_id or request_id in {"", ".", ".."} or "\x00" in request_id:
            raise ValueError(f"request id {request_id!r} cannot name a response file")
        ensure_dir(self.responses_dir)
        target = self.response_path(request_id)
        temp = temp_name_for(target)
        try:
            self.writer.write_new_file(temp, body)
            try:
                self.writer.link(temp, target)
            except FileExistsError:
                return False
            self.writer.fsync_dir(self.responses_dir)
            return True
        finally:
            temp.unlink(missing_ok=True)

    def delete_request(self, name: str) -> None:
        """Safe delete: a child that already removed it is not an error."""
        (self.requests_dir / name).unlink(missing_ok=True)


@dataclass(frozen=True)
class QuarantineRecord:
    """Where an unusable request went and why."""

    moved_to: Path | None
    reason_file: Path
    reason: str


class Quarantine:
    """`<state>/quarantine/<enc(session)>/`: unusable request files, each with a `.reason.json`."""

    def __init__(self, state_dir: Path) -> None:
        self.base = state_dir / "quarantine"
        self._serial = itertools.count()

    def hold(self, inbox: SessionInbox, name: str, reason: str, answered: bool) -> QuarantineRecord:
        """Move `requests/<name>` out of the inbox (as it is, symlink included) and record why."""
        folder = self.base / inbox.folder_name
        ensure_dir(folder)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        safe = quote(os.fsencode(name), safe="-_.")[:180]
        # The serial keeps names unique when the clock stands still or jumps back.
        stem = f"{stamp}-{time.time_ns() % 1_000_000_000:09d}-{os.getpid()}.{next(self._serial)}-{safe}"
        source = inbox.requests_dir / name
        target = folder / stem
        try:
            link_target: str | None = os.readlink(source)
        except OSError:
            link_target = None
        destination: Path | None = target
        try:
            _move_without_following(source, target, link_target)
        except FileNotFoundError:
            destination = None
        record = {
            "sessionId": inbox.session_id,
            "originalPath": os.fsencode(str(source)).decode("utf-8", "backslashreplace"),
            "reason": reason,
            "quarantinedAt": time.time_ns() // 1_000_000,
            "childAnswered": answered,
            "symlinkTarget": link_target,
        }
        reason_file = folder / f"{stem}.reason.json"
        write_new_file(reason_file, compact_json(record) + b"\n")
        return QuarantineRecord(moved_to=destination, reason_file=reason_file, reason=reason)

    def records(self) -> list[dict[str, object]]:
        """Every recorded reason, oldest first (for `status` views and tests)."""
        if not self.base.exists():
            return []
        found: list[dict[str, object]] = []
        for path in sorted(self.base.glob("*/*.reason.json")):
            with contextlib.suppress(OSError, ValueError):  # one being written right now
                found.append(json.loads(path.read_bytes()))
        return found


def _move_without_following(source: Path, destination: Path, link_target: str | None) -> None:
    try:
        os.rename(source, destination)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    # Another filesystem: copy what is there (never through a symlink), then remove the original.
    if link_target is not None:
        os.symlink(link_target, destination)
    elif source.is_dir() and not source.is_symlink():
        shutil.copytree(source, destination, symlinks=True)
        shutil.rmtree(source)
        return
    else:
        fd = os.open(source, _READ_FLAGS)
        try:
            with os.fdopen(os.dup(fd), "rb") as handle:
                write_new_file(destination, handle.read())
        finally:
            os.close(fd)
    os.unlink(source)
