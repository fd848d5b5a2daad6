"""`<state>/quarantine/<enc(session)>/`: unusable request files with their reason, pruned by age and count.

A file that cannot be served is moved out of the inbox as it is (a link is moved itself, never
followed) next to a `.reason.json`, so nothing is deleted without a trace. Every folder is opened by
descriptor from the state dir down (`core.tree`), and the quarantine is bounded: entries older than
`QUARANTINE_MAX_AGE_S` go, and beyond `QUARANTINE_MAX_ENTRIES` the oldest go first.
"""

from __future__ import annotations

import calendar
import contextlib
import errno
import itertools
import json
import logging
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from core.clock import SYSTEM_CLOCK, Clock
from core.files import read_small, remove, write_all, write_new
from core.inbox import SessionInbox
from core.tree import FILE_MODE, Anchor, UnsafeFolder, check_name, lstat_or_none, open_dir
from core.wire.base import compact_json

log = logging.getLogger("pi_authorizer.quarantine")

QUARANTINE_MAX_AGE_S = 30 * 24 * 3600
QUARANTINE_MAX_ENTRIES = 1_000
PRUNE_EVERY = 100
"""Holds between two prunes: the quarantine holds at most `max_entries + PRUNE_EVERY` entries."""

_REASON = ".reason.json"
_STEM = re.compile(r"^(\d{8}T\d{6}Z)-(\d{9})-")
_COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class QuarantineRecord:
    """Where an unusable request went and why."""

    moved_to: Path | None
    reason_file: Path
    reason: str
    left_in_place: str | None = None


class Quarantine:
    """Holds unusable request files with their reasons; bounded by age and count."""

    def __init__(
        self,
        state_dir: Path,
        anchor: Anchor | None = None,
        clock: Clock = SYSTEM_CLOCK,
        max_age_s: float = QUARANTINE_MAX_AGE_S,
        max_entries: int = QUARANTINE_MAX_ENTRIES,
    ) -> None:
        self.base = state_dir / "quarantine"
        self.tree = anchor or Anchor(state_dir, "state dir")
        self.clock = clock
        self.max_age_s = max_age_s
        self.max_entries = max_entries
        self._holds_since_prune: int | None = None
        self._serial = itertools.count()

    def hold(self, inbox: SessionInbox, name: str, reason: str, answered: bool) -> QuarantineRecord:
        """Move `requests/<name>` out of the inbox (as it is, symlink included) and record why."""
        if self._holds_since_prune is None or self._holds_since_prune >= PRUNE_EVERY:
            self.prune()
        now = self.clock.wall()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        safe = quote(os.fsencode(name), safe="-_.")[:180]
        digits = int(now * 1e9) % 1_000_000_000
        # The pid and serial keep names unique when the clock stands still or jumps back, and
        # between two processes sharing one state dir.
        unique = f"{os.getpid()}.{next(self._serial)}"
        with self.tree.folder(("quarantine", inbox.folder_name), create=True) as held:
            stem = f"{stamp}-{digits:09d}-{unique}-{safe}"
            while lstat_or_none(held, stem) is not None or lstat_or_none(held, stem + _REASON) is not None:
                digits = (digits + 1) % 1_000_000_000  # never replace an earlier entry
                stem = f"{stamp}-{digits:09d}-{unique}-{safe}"
            link_target: str | None = None
            left: str | None = None
            moved = False
            try:
                with inbox.folder("requests") as source:
                    with contextlib.suppress(OSError):
                        link_target = os.readlink(name, dir_fd=source)
                    left = _move(source, name, held, stem, link_target)
                    moved = left is None
            except FileNotFoundError:
                pass  # the child withdrew it: only the reason is kept
            record = {
                "sessionId": inbox.session_id,
                "originalPath": _printable(inbox.requests_dir / name),
                "reason": reason,
                "quarantinedAt": int(now * 1000),
                "childAnswered": answered,
                "symlinkTarget": link_target,
            }
            if left is not None:
                record["leftInPlace"] = left
            write_new(held, stem + _REASON, compact_json(record) + b"\n", FILE_MODE)
        self._holds_since_prune = (self._holds_since_prune or 0) + 1
        folder = self.base / inbox.folder_name
        return QuarantineRecord(
            moved_to=folder / stem if moved else None,
            reason_file=folder / (stem + _REASON),
            reason=reason,
            left_in_place=left,
        )

    def records(self) -> list[dict[str, object]]:
        """Every recorded reason, oldest first (for `status` views and tests)."""
        found: list[tuple[str, dict[str, object]]] = []
        for folder, names in self._entries().items():
            try:
                with self.tree.folder(("quarantine", folder)) as fd:
                    for name in names:
                        data = read_small(fd, name, 1 << 20) if name.endswith(_REASON) else None
                        if data is not None:
                            with contextlib.suppress(ValueError):  # one being written right now
                                found.append((name, json.loads(data)))
            except (FileNotFoundError, UnsafeFolder):
                continue
        return [record for _, record in sorted(found, key=lambda pair: pair[0])]

    def prune(self) -> int:
        """Remove entries older than `max_age_s`, then the oldest beyond `max_entries`; returns how many."""
        self._holds_since_prune = 0
        entries: list[tuple[str, str, str]] = []  # (stamp+ns, folder, stem)
        for folder, names in self._entries().items():
            for name in names:
                stem = name.removesuffix(_REASON)
                match = _STEM.match(stem)
                if match is not None and name.endswith(_REASON):
                    entries.append((f"{match[1]}-{match[2]}", folder, stem))
        entries.sort()
        cutoff = self.clock.wall() - self.max_age_s
        excess = len(entries) - self.max_entries
        doomed = [
            (folder, stem)
            for index, (key, folder, stem) in enumerate(entries)
            if index < excess or calendar.timegm(time.strptime(key[:16], "%Y%m%dT%H%M%SZ")) < cutoff
        ]
        for folder, stem in doomed:
            try:
                with self.tree.folder(("quarantine", folder)) as fd:
                    _remove_entry(fd, stem)
                    remove(fd, stem + _REASON)
            except (FileNotFoundError, UnsafeFolder):
                continue
        return len(doomed)

    def _entries(self) -> dict[str, list[str]]:
        """Names in each `quarantine/<folder>/` (folders that are links are skipped, never followed)."""
        try:
            with self.tree.folder(("quarantine",)) as base:
                out: dict[str, list[str]] = {}
                for folder in sorted(os.listdir(base)):
                    try:
                        fd = open_dir(base, (folder,))
                    except (FileNotFoundError, UnsafeFolder) as exc:
                        if isinstance(exc, UnsafeFolder):
                            log.warning("quarantine: %s; skipped", exc)
                        continue
                    try:
                        out[folder] = sorted(os.listdir(fd))
                    finally:
                        os.close(fd)
                return out
        except FileNotFoundError:
            return {}
        except UnsafeFolder as exc:
            log.warning("quarantine: %s; not read and not pruned", exc)
            return {}


def _printable(path: Path) -> str:
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


def _move(source: int, name: str, held: int, stem: str, link_target: str | None) -> str | None:
    """Rename `name` into the quarantine; across filesystems copy it by descriptor. `None` when moved,
    else why it was left in place."""
    try:
        os.rename(check_name(name), stem, src_dir_fd=source, dst_dir_fd=held)
        return None
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    info = lstat_or_none(source, name)
    if info is None:
        raise FileNotFoundError(errno.ENOENT, "withdrawn", name)
    if link_target is not None:
        os.symlink(link_target, stem, dir_fd=held)
    elif stat.S_ISREG(info.st_mode):
        _copy_regular(source, name, held, stem)
    else:
        return "not a regular file, on another filesystem than the state dir: not copied"
    os.unlink(name, dir_fd=source)
    return None


def _copy_regular(source: int, name: str, held: int, stem: str) -> None:
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=source)
    try:
        dst = os.open(stem, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
                      dir_fd=held)
        try:
            while chunk := os.read(src, _COPY_CHUNK):
                write_all(dst, chunk)
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _remove_entry(fd: int, stem: str) -> None:
    info = lstat_or_none(fd, stem)
    if info is None:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(stem, dir_fd=fd)
    else:
        remove(fd, stem)
