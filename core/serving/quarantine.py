"""The quarantine: where a request file serving cannot use goes, with its reason and its child answered.

`Quarantining` is the route's step for such a file: an unusable request is moved out with its reason
(its child answered at once with an explained denial when its name is a safe id and the file is still
there; its history row committed first, so no file is set aside that the history lacks), and a
response this node did not write is reported as forged and its request moved out too.
Nothing is deleted without a trace. It moves no record: it says whether the file is still held, and
the inbox's door of the route (`core.serving.pipeline`) moves the record.

`Quarantine` is the store, `<state>/quarantine/<enc(session)>/`: each file moved out of the inbox as
it is (a link is moved itself, never followed) next to a `.reason.json`. Every folder is opened by
descriptor from the state dir down (`core.disk.tree`), and the store is bounded: entries older than
`QUARANTINE_MAX_AGE_S` go, and beyond `QUARANTINE_MAX_ENTRIES` or `QUARANTINE_MAX_BYTES` the oldest go
first. The evidence is the request's bytes as served: a file that holds other bytes now (an answer
written into it) or is larger than `QUARANTINE_MAX_FILE_BYTES` is kept as those bytes (or its start),
written anew, and removed from the inbox.

The reason is written before the file moves (`HOLD_CHECKPOINTS`, each a point of the fault hook): a
durable `<stem>.pending.json`, then the move to `<stem>`, then one rename to `<stem>.reason.json`.
A process killed in between leaves the file in the inbox (served again on restart) or the file held;
`prune` (at start, then every `PRUNE_EVERY` holds) completes or removes what a dead process left.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import itertools
import json
import logging
import os
import re
import sqlite3
import stat
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from core.disk.entries import move_entry, read_small, remove, remove_entry, write_new
from core.disk.paths import is_safe_request_id
from core.disk.tree import FILE_MODE, Anchor, UnsafeFolder, lstat_or_none, open_dir
from core.forwarding.inbox import SessionInbox, display_name
from core.forwarding.liveness import pid_alive
from core.seams import PRODUCTION, Seams, retrying
from core.serving.sessions import ServedSession, Sessions
from core.serving.verdicts import Ledger, gate_denial
from core.text import log_safe
from core.vocabulary.asks import AskKey
from core.vocabulary.events import EventKind, ServeEvent, label
from core.wire.base import compact_json
from core.wire.request import ParsedRequest
from core.wire.response import encode_response

log = logging.getLogger("pi_authorizer.quarantine")
_T = TypeVar("_T")
serve_log = logging.getLogger("pi_authorizer.serve")

QUARANTINE_MAX_AGE_S = 30 * 24 * 3600
QUARANTINE_MAX_ENTRIES = 1_000
QUARANTINE_MAX_BYTES = 64 * 1024 * 1024
"""All held files together: beyond it the oldest go first (a prune; see `PRUNE_EVERY`)."""
QUARANTINE_MAX_FILE_BYTES = (1 << 20) + 1
"""Evidence kept of one file: a request is at most 1 MiB; of a larger file only its start is kept
(its size in the reason), never a whole copy of it."""
PRUNE_EVERY = 100
"""Holds between two prunes: the quarantine holds at most `max_entries + PRUNE_EVERY` entries."""

QUARANTINE_THREADS = 4
"""Threads of the quarantine's own (answers of unusable files, the moves): as many as the shared
executor's fsyncs overlapped before, so a flood drains as fast, but in a queue of its own."""

HOLD_CHECKPOINTS = ("reasoned", "moved")
"""Fault points of `hold`: the pending reason is durable; the file is held, its reason still pending."""

_REASON = ".reason.json"
_PENDING = ".pending.json"
_COPY_TEMP = re.compile(r"\.\d+\.\d+\.tmp")  # `core.disk.entries.temp_name` of a held name
_STEM = re.compile(r"^(\d{8}T\d{6}Z)-(\d{9})-(?:(\d+)\.\d+-)?")


@dataclass(frozen=True)
class Kept:
    """What became of a file serving could not use: whether it is still `held` in its inbox (it could
    not be moved: left in place and ignored), where it went, and what observers are told."""

    key: AskKey
    held: bool
    where: str
    reason: str
    answered: bool
    kind: EventKind
    raw: bytes | None
    #: It could not be moved now (a full or failing disk): left in place, set aside again after a wait
    #: (`Pipeline._quarantined`); observers hear of it once it is.
    waits: bool = False


class Quarantining:
    """The route's step for a file it cannot serve: its child answered, the file moved out, reported."""

    def __init__(
        self, store: Quarantine, sessions: Sessions, emit: Callable[[ServeEvent], None], seams: Seams,
        ledger: Ledger | None,
    ) -> None:
        self.store, self.sessions, self.emit, self.seams = store, sessions, emit, seams
        self.ledger = ledger
        self.keeps_history = ledger is not None
        #: Files left in place by a full or failing disk whose child was answered then (their reason,
        #: written once they are set aside, says so).
        self._answered_before: set[AskKey] = set()
        #: Files whose rows are written and that are not set aside yet (their answer waits for the
        #: disk): served again, they get no second row.
        self._recorded_unmoved: set[tuple[AskKey, str]] = set()
        # Threads of its own for setting files aside (their answer, the move): a flood of junk in
        # one session queues here, never in the shared executor where another session's listing and
        # reads wait their turn (issue 34 finding 5: 20,000 junk files delayed a sibling's ask 37 s).
        self._thread = ThreadPoolExecutor(QUARANTINE_THREADS, thread_name_prefix="quarantine")

    def _off_loop(self, work: Callable[[], _T]) -> Awaitable[_T]:
        return asyncio.get_running_loop().run_in_executor(self._thread, work)

    async def unusable(
        self, served: ServedSession, key: AskKey, reason: str, raw: bytes | None, answer: bool = True
    ) -> Kept | None:
        """Quarantine an unusable file; answer its child at once when its name is a safe id and the
        file is still there (a withdrawn request's child is gone: a response would be left behind).
        None, with the file left in place, when that answer or its history row cannot be written now (a
        full or failing disk, a locked history): it waits, and is answered and set aside once they allow.

        A file an earlier run answered (these very bytes, its history says) and died before moving is
        moved without a second answer: its child may have read the first and be deleting its request."""
        before = answer and raw is not None and await self._answered_before_restart(key, raw)
        if before:
            reason = f"{reason} (these very bytes were answered before, by a run that did not move them)"
        if not await self._recorded(key, reason, raw, "quarantined"):
            return None  # neither answered nor moved until its row is written: never set aside untraced
        name = key.name
        stem = name.removesuffix(".json")
        answered = False
        inbox = served.inbox
        try:
            answer = answer and not before and is_safe_request_id(stem) and inbox.has_request(name)
            if answer and not inbox.has_response(stem):
                body = encode_response(gate_denial(inbox.session_id, self.seams.clock, reason))

                def answered_and_noted() -> bool:
                    # The note follows the link on the same thread: a backlog's links never run ahead
                    # of their notes (campaign5: a third of 800 linked unnoted at a kill when the note
                    # waited for the loop), so a kill catches at most the files on the threads.
                    linked = inbox.write_response(stem, body)
                    if linked and raw is not None:
                        self._noted(key, raw)
                    return linked

                answered = await retrying(
                    self.seams, "answering a rejected request", answered_and_noted, self._off_loop,
                )
            if before and raw is not None:
                await self._note_answered(key, raw)  # this run's row says it too
        except UnsafeFolder as exc:
            serve_log.error("answering rejected %s failed: %s", log_safe(display_name(name)), exc)
        except OSError as exc:
            shown = log_safe(display_name(name))
            serve_log.warning("answering rejected %s: waiting for disk (%s)", shown, exc)
            return None
        except Exception as exc:
            serve_log.error("answering rejected %s failed: %s", log_safe(display_name(name)), exc)
        if key in self._answered_before or before:
            answered = True
        return await self._move_out(served, key, reason, answered, raw)

    async def _answered_before_restart(self, key: AskKey, raw: bytes) -> bool:
        """Whether the history says an earlier run answered this file's child (False when it cannot
        say now: the file is then answered as any other)."""
        ledger = self.ledger
        if ledger is None:
            return False
        try:
            return await self._off_loop(lambda: ledger.set_aside_answered(key, raw))
        except (OSError, sqlite3.OperationalError) as exc:
            serve_log.error("%s: the history cannot say whether it was answered before: %s",
                            label(key, None), exc)
            return False

    def _noted(self, key: AskKey, raw: bytes) -> None:
        """The note of a linked answer, on the thread that linked it; a history that refuses it now is
        logged (a kill before the move may then answer it again, as before this note existed)."""
        if self.ledger is None:
            return
        try:
            self.ledger.note_set_aside_answered(key, raw)
        except (OSError, sqlite3.OperationalError) as exc:
            serve_log.error("%s: the history cannot note its answer: %s", label(key, None), exc)

    async def _note_answered(self, key: AskKey, raw: bytes) -> None:
        """The history notes the answer before the file moves (retried; one that still fails is logged:
        a kill before the move may then answer it again, as before this note existed)."""
        ledger = self.ledger
        if ledger is None:
            return
        try:
            await retrying(self.seams, "noting the answer of a request set aside",
                           lambda: ledger.note_set_aside_answered(key, raw), self._off_loop)
        except (OSError, sqlite3.OperationalError) as exc:
            serve_log.error("%s: the history cannot note its answer: %s", label(key, None), exc)

    async def forged(self, served: ServedSession, key: AskKey, parsed: ParsedRequest, when: str) -> Kept:
        """A response this node did not write (log, event, history): its request is moved out."""
        body = await asyncio.to_thread(served.inbox.peek_response, parsed.request.id)
        ours = "" if self.keeps_history else " (this node keeps no history, so it may be its own)"
        reason = (
            f"FORGED RESPONSE: a response this node did not write appeared {when}{ours}; "
            f"the child may act on it: {body!r}"
        )
        serve_log.warning("%s %s", label(key, parsed), log_safe(reason, 400))
        # Evidence of a forgery is moved out even when the history refuses its row now (the reason
        # file keeps it): the forged response must not stay beside a request this node serves.
        await self._recorded(key, reason, parsed.raw, "forged")
        return await self._move_out(served, key, reason, False, parsed.raw, kind="forged")

    async def _recorded(self, key: AskKey, reason: str, raw: bytes | None, kind: EventKind) -> bool:
        """The history's row of a file about to be set aside, committed before it moves (as a verdict is
        before its response): a run killed after the move leaves no quarantined file the history lacks
        (the quarantine keeps only its newest entries). False when the history refuses it now."""
        ledger = self.ledger
        if ledger is None or (key, reason) in self._recorded_unmoved:
            return True
        event = ServeEvent(kind, key, self.seams.clock.wall(), reason=reason, raw=raw)
        try:
            await retrying(self.seams, "recording a request set aside in the history",
                           lambda: ledger.record_quarantined(event), self._off_loop)
        except (OSError, sqlite3.OperationalError) as exc:
            serve_log.error("%s: the history cannot record it being set aside: %s", label(key, None), exc)
            return False
        self._recorded_unmoved.add((key, reason))
        return True

    async def _move_out(
        self, served: ServedSession, key: AskKey, reason: str, answered: bool, raw: bytes | None,
        kind: EventKind = "quarantined",
    ) -> Kept:
        """Move the file to the store; one that cannot be moved is held (left in place, ignored)."""
        self._recorded_unmoved.discard((key, reason))
        held = True
        try:
            kept = await self._off_loop(
                lambda: self.store.hold(served.inbox, key.name, reason, answered, raw))
            self.sessions.clear_unsafe(served, "quarantine")
        except UnsafeFolder as exc:
            where = f"could not be quarantined ({exc}); left in place and ignored"
            self.sessions.report_unsafe(served, "quarantine", exc, "unusable requests are left in place")
        except OSError as exc:  # a full or failing disk: it waits, and is set aside once the disk allows
            self._recorded_unmoved.add((key, reason))  # its row is written: not again
            if answered:
                self._answered_before.add(key)
            where = f"could not be quarantined now ({exc}); left in place, set aside once the disk allows"
            return Kept(key, True, where, reason, answered, kind, raw, waits=True)
        except Exception as exc:
            where = f"could not be quarantined ({exc}); left in place and ignored"
        else:
            self._answered_before.discard(key)
            if kept.left_in_place is not None:
                where = f"left in place ({kept.left_in_place})"
            else:
                where = f"quarantined to {kept.moved_to}" if kept.moved_to else "already gone"
                held = False  # moved out: a new file under the same name later is a new request
        return Kept(key, held, where, reason, answered, kind, raw)

    def report(self, served: ServedSession, kept: Kept) -> None:
        """Observers and the log hear what became of the file (once its record moved); of one that waits
        for the disk, only the log (observers hear once it is set aside)."""
        if not kept.waits:
            self.emit(ServeEvent(kept.kind, kept.key, self.seams.clock.wall(), reason=kept.reason,
                                 raw=kept.raw))
        serve_log.warning(
            "session=%s file=%s rejected: %s; %s%s",
            log_safe(served.inbox.session_id),
            log_safe(display_name(kept.key.name)),
            log_safe(kept.reason, 300),
            kept.where,
            "; child answered with a gate_error denial" if kept.answered else "",
        )


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
        seams: Seams = PRODUCTION,
        max_age_s: float = QUARANTINE_MAX_AGE_S,
        max_entries: int = QUARANTINE_MAX_ENTRIES,
        max_bytes: int = QUARANTINE_MAX_BYTES,
    ) -> None:
        self.base = state_dir / "quarantine"
        self.max_bytes = max_bytes
        self.tree = anchor or Anchor(state_dir, "state dir")
        self.clock, self.fault = seams.clock, seams.fault
        self.max_age_s = max_age_s
        self.max_entries = max_entries
        self._holds_since_prune: int | None = None
        self._serial = itertools.count()

    def hold(
        self, inbox: SessionInbox, name: str, reason: str, answered: bool, raw: bytes | None = None
    ) -> QuarantineRecord:
        """Move `requests/<name>` out of the inbox (as it is, symlink included) and record why; `raw`,
        the bytes served, is the evidence when the file holds others now or is too large."""
        if self._holds_since_prune is None or self._holds_since_prune >= PRUNE_EVERY:
            self.prune()
        now = self.clock.wall()
        record: dict[str, Any] = {
            "sessionId": inbox.session_id,
            "originalPath": _printable(inbox.requests_dir / name),
            "reason": reason,
            "quarantinedAt": int(now * 1000),
            "childAnswered": answered,
            "symlinkTarget": None,
        }
        moved = False
        with self.tree.folder(("quarantine", inbox.folder_name), create=True) as held:
            # The pid and serial keep names unique when the clock stands still or jumps back, and
            # between two processes sharing one state dir.
            stem = _free_stem(held, now, name, f"{os.getpid()}.{next(self._serial)}")
            try:
                with inbox.folder("requests") as source:
                    with contextlib.suppress(OSError):
                        record["symlinkTarget"] = os.readlink(name, dir_fd=source)
                    evidence = _evidence_instead(source, name, raw, record)
                    if evidence is not None:
                        moved = self._reason_then_write(source, name, held, stem, record, evidence)
                    else:
                        moved = self._reason_then_move(source, name, held, stem, record)
            except FileNotFoundError:
                pass  # the child withdrew it: only the reason is kept
            if not moved:
                # Alone (the child withdrew its request): made whole as pending, then renamed, as a held
                # file's reason is, so a kill never leaves a reason file holding nothing.
                remove(held, stem + _PENDING)
                write_new(held, stem + _PENDING, _encoded(record), FILE_MODE)
                os.rename(stem + _PENDING, stem + _REASON, src_dir_fd=held, dst_dir_fd=held)
        self._holds_since_prune = (self._holds_since_prune or 0) + 1
        folder = self.base / inbox.folder_name
        return QuarantineRecord(
            moved_to=folder / stem if moved else None,
            reason_file=folder / (stem + _REASON),
            reason=reason,
            left_in_place=record.get("leftInPlace"),
        )

    def _reason_then_move(self, source: int, name: str, held: int, stem: str, record: dict[str, Any]) -> bool:
        """The reason made durable as pending, the move, then the reason completed by one rename.
        `False` when the file stayed (`leftInPlace` says why if it is there): the caller writes it."""
        info = lstat_or_none(source, name)
        if info is not None and stat.S_ISDIR(info.st_mode):
            # A tree is refused in place, never moved into the state dir (issue 34 finding 6: a
            # 1,000-deep one broke the prune and the quarantine's caps).
            record["leftInPlace"] = "a folder: refused in place, never moved into the state dir"
            return False
        pending = stem + _PENDING
        write_new(held, pending, _encoded(record), FILE_MODE)
        self.fault("reasoned")
        try:
            left = move_entry(source, name, held, stem)
        except BaseException:
            remove(held, pending)
            raise
        if left is not None:
            record["leftInPlace"] = left
            return False
        self.fault("moved")
        os.rename(pending, stem + _REASON, src_dir_fd=held, dst_dir_fd=held)
        return True

    def _reason_then_write(
        self, source: int, name: str, held: int, stem: str, record: dict[str, Any], evidence: bytes
    ) -> bool:
        """As `_reason_then_move`, the evidence written anew (the bytes served, or a huge file's start)
        and the file then removed from the inbox."""
        pending = stem + _PENDING
        write_new(held, pending, _encoded(record), FILE_MODE)
        self.fault("reasoned")
        try:
            write_new(held, stem, evidence, FILE_MODE)
        except BaseException:
            remove(held, pending)
            raise
        remove(source, name)
        self.fault("moved")
        os.rename(pending, stem + _REASON, src_dir_fd=held, dst_dir_fd=held)
        return True

    def records(self) -> list[dict[str, object]]:
        """Every recorded reason, oldest first (for `status` views and tests)."""
        found: list[tuple[str, dict[str, object]]] = []
        for _, fd, names in self._folders():
            for name in names:
                data = read_small(fd, name, 1 << 20) if name.endswith(_REASON) else None
                if data is not None:
                    with contextlib.suppress(ValueError):  # one being written right now
                        found.append((name, json.loads(data)))
        return [record for _, record in sorted(found, key=lambda pair: pair[0])]

    def prune(self) -> int:
        """Remove entries older than `max_age_s`, then the oldest beyond `max_entries`; returns how many."""
        self._holds_since_prune = 0
        entries: list[tuple[str, str, str]] = []  # (stamp+ns, folder, stem)
        cutoff = self.clock.wall() - self.max_age_s
        for folder, fd, names in self._folders():
            for name in _recover(fd, names, cutoff):
                match = _STEM.match(name)
                if match is not None and name.endswith(_REASON):
                    entries.append((f"{match[1]}-{match[2]}", folder, name.removesuffix(_REASON)))
        entries.sort()
        doomed: dict[str, list[str]] = {}
        sizes = self._sizes()
        total = sum(sizes.get((folder, stem), 0) for _, folder, stem in entries)
        for index, (key, folder, stem) in enumerate(entries):
            if index < len(entries) - self.max_entries or _stamp_time(key) < cutoff or total > self.max_bytes:
                doomed.setdefault(folder, []).append(stem)
                total -= sizes.get((folder, stem), 0)
        removed = 0
        for folder, fd, _ in self._folders():
            for stem in doomed.get(folder, ()):
                try:  # one entry that cannot go never keeps the others (the caps hold)
                    remove_entry(fd, stem)
                    remove(fd, stem + _REASON)
                    removed += 1
                except OSError as exc:
                    log.warning("quarantine: %s could not be removed: %s", log_safe(stem), exc)
        return removed

    def _sizes(self) -> dict[tuple[str, str], int]:
        """The bytes of each entry (its held file and its reason), by folder and stem."""
        sizes: dict[tuple[str, str], int] = {}
        for folder, fd, names in self._folders():
            for name in names:
                info = lstat_or_none(fd, name)
                if info is None:
                    continue
                stem = name.removesuffix(_REASON)
                sizes[(folder, stem)] = sizes.get((folder, stem), 0) + info.st_size
        return sizes

    def _folders(self) -> Iterator[tuple[str, int, list[str]]]:
        """Each `quarantine/<folder>/` opened, with its names (a folder that is a link is skipped, never
        followed); the descriptor is closed when the next one is asked for."""
        try:
            with self.tree.folder(("quarantine",)) as base:
                for folder in sorted(os.listdir(base)):
                    try:
                        fd = open_dir(base, (folder,))
                    except UnsafeFolder as exc:
                        log.warning("quarantine: %s; skipped", exc)
                        continue
                    except FileNotFoundError:
                        continue
                    try:
                        yield folder, fd, sorted(os.listdir(fd))
                    finally:
                        os.close(fd)
        except FileNotFoundError:
            return
        except UnsafeFolder as exc:
            log.warning("quarantine: %s; not read and not pruned", exc)


def _evidence_instead(source: int, name: str, raw: bytes | None, record: dict[str, Any]) -> bytes | None:
    """The bytes to keep instead of moving the file itself: the bytes served when it holds others now
    (an answer written into it), the start of a file too large to keep; None: move it as it is."""
    info = lstat_or_none(source, name)
    if info is None or not stat.S_ISREG(info.st_mode):
        return None
    if raw is not None and (info.st_size != len(raw) or read_small(source, name, len(raw)) != raw):
        record["evidence"] = "the request's bytes as served (its file held other bytes when it was held)"
        return raw
    if info.st_size <= QUARANTINE_MAX_FILE_BYTES:
        return None
    record["originalSize"] = info.st_size
    record["evidence"] = f"the first {QUARANTINE_MAX_FILE_BYTES} bytes"
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=source)
    try:
        return os.pread(fd, QUARANTINE_MAX_FILE_BYTES, 0)
    finally:
        os.close(fd)


def _recover(fd: int, names: list[str], cutoff: float) -> list[str]:
    """What a killed `hold` left (see the module docstring), when that process is gone (or its pid
    taken by another, once older than `cutoff`): a pending reason beside its held file is
    completed; one alone, a copy's temp file and an empty lone reason are removed."""
    pending = [name for name in names if name.endswith(_PENDING) and _holder_gone(name, cutoff)]
    # A lone reason written in place by an earlier version, left empty by a kill: it says nothing.
    empty = [name for name in names if name.endswith(_REASON) and _holder_gone(name, cutoff)
             and lstat_or_none(fd, name.removesuffix(_REASON)) is None
             and (found := lstat_or_none(fd, name)) is not None and found.st_size == 0]
    for name in empty:
        remove(fd, name)
    for name in pending:
        stem = name.removesuffix(_PENDING)
        for temp in (n for n in names if n.startswith(stem) and _COPY_TEMP.fullmatch(n[len(stem) :])):
            remove(fd, temp)
        if lstat_or_none(fd, stem) is None or lstat_or_none(fd, stem + _REASON) is not None:
            remove(fd, name)
        else:
            os.rename(name, stem + _REASON, src_dir_fd=fd, dst_dir_fd=fd)
    return sorted(os.listdir(fd)) if pending or empty else names


def _stamp_time(key: str) -> float:
    return calendar.timegm(time.strptime(key[:16], "%Y%m%dT%H%M%SZ"))


def _holder_gone(name: str, cutoff: float) -> bool:
    """The entry's name holds the pid of a process that is gone (this one is not), or is so old
    that no hold can still be under way."""
    match = _STEM.match(name)
    if match is None or match[3] is None:
        return False
    pid = int(match[3])
    return _stamp_time(match[1]) < cutoff or (pid != os.getpid() and not pid_alive(pid))


def _free_stem(held: int, now: float, name: str, unique: str) -> str:
    """`<stamp>-<ns>-<pid>.<serial>-<name>`, free in `held` (never replaces an earlier entry)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    safe = quote(os.fsencode(name), safe="-_.")[:180]
    digits = int(now * 1e9) % 1_000_000_000
    stem = f"{stamp}-{digits:09d}-{unique}-{safe}"
    while any(lstat_or_none(held, stem + end) is not None for end in ("", _REASON, _PENDING)):
        digits = (digits + 1) % 1_000_000_000
        stem = f"{stamp}-{digits:09d}-{unique}-{safe}"
    return stem


def _encoded(record: dict[str, Any]) -> bytes:
    return compact_json(record) + b"\n"


def _printable(path: Path) -> str:
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")
