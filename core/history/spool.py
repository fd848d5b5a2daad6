"""What the history could not write by the time it closed, kept beside its file for the next open.

A history still failing at exit holds, in its queue, what only this process knows: arrivals, and the
fail-safe answers whose verdict the ledger refused (`core.history.transactions`). Lost, the next start would
take such an ask's row (still `pending`, its request file gone) for a withdrawal, though its child was
answered. So they are written, one JSON line each, to `<history file>.unwritten.jsonl` in the state
dir (created by descriptor, never through a link, made durable, renamed into place); the next open
queues them first and removes the file once they are written (the `HistoryWriter` does both). A
replay is harmless twice over: an arrival reopens its own row, a fail-safe close already written is
not written again.

The lines are written as one zlib stream after a `#zlib` line (`COMPRESSED`), a request's bytes once
(its `raw` only when it differs): a full disk's reserve held ~170 fail-safe closes of ~1.4 KB as
plain lines, fewer than a stop during a burst queues (412 in one campaign run); packed, a close of
the usual ask takes ~0.1 KB. A spool of plain lines (written before) is read as it is.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import logging
import math
import os
import stat
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from core import platform
from core.disk.entries import read_small, remove, temp_name, write_new
from core.disk.tree import Anchor, check_name, lstat_or_none
from core.history.table import NOTES
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from core.wire.response import ForwardedResponse, encode_response

log = logging.getLogger("pi_authorizer.history")

#: Spools larger than this are not read back (a queue of that size is not this program's own).
MAX_SPOOL_BYTES = 256 << 20
#: Space held beside the history (`<history file>.reserve.<k>`) and given up when the spool meets a
#: full disk at exit, so the last rows (a fail-safe close) are still written: a full state dir at exit
#: used to lose them, and the next start called those asks `withdrawn`.
RESERVE_BYTES = 256 << 10
#: The reserve is held in this many parts, given up one at a time as a spool needs them: a stop takes
#: what its spool needs and leaves the rest to the next (a start on a disk still full cannot take it
#: back, and the next stop, finding none, kept nothing: campaign10, up to 864 rows in one run).
RESERVE_PARTS = 4
#: Of the reserve, what a spool written into it leaves free (a file's last page, the folder's entry).
RESERVE_MARGIN = 16 << 10
#: The first line of a packed spool: the rest is one zlib stream of the JSON lines.
COMPRESSED = b"#zlib\n"
#: Packed input read back at a time: a stream cut short still gives the lines before the cut.
_CHUNK = 64 << 10
#: Unreadable lines logged one by one; the rest are counted in one line (a spool of a million empty
#: lines, 1 KB packed, logged a million errors: ~20 s, and a log as large as the state dir could hold).
_LOGGED_UNREADABLE = 10


def spool_name(history: Path) -> str:
    return f"{history.name}.unwritten.jsonl"


def reserve_name(history: Path, part: int | None = None) -> str:
    """A part's file (`part` of `RESERVE_PARTS`); without one, the single file written before."""
    return f"{history.name}.reserve" if part is None else f"{history.name}.reserve.{part}"


def _part_bytes() -> int:
    return RESERVE_BYTES // RESERVE_PARTS


def save(history: Path, events: Sequence[ServeEvent]) -> None:
    """Replace the spool of `history` with `events` (durable before it takes the spool's name). On a
    full disk the reserve's parts are given up for it one at a time, each followed by another try;
    with none left, the fail-safe closes that the space there is holds are kept (`_closes_that_fit`),
    never fewer than the spool being replaced holds."""
    lines = [json.dumps(_encoded(event)).encode() + b"\n" for event in events]
    name = spool_name(history)
    data = packed(lines)
    with Anchor(history.parent, "state dir").folder(create=True) as folder:
        given = 0
        while True:
            try:
                _replace(folder, name, data)
                break
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                if _give_up_part(folder, history):
                    given += 1
                    continue
                if given:
                    log.warning("the disk of the state dir is full: all %d parts of the space reserved "
                                "were used for the history's last %d rows", given, len(events))
                _keep_what_fits(folder, history, events, lines)
                return
        if given:
            log.warning("the disk of the state dir is full: %d part(s) of the space reserved were used for "
                        "the history's last %d rows", given, len(events))


def _give_up_part(folder: int, history: Path) -> bool:
    """Remove one part of the reserve (the single file written before first); False when none is left.
    Only a regular file is a part: a folder or a link under its name is the user's, left alone (a
    folder raised, and the spool with it)."""
    for part in (None, *range(RESERVE_PARTS - 1, -1, -1)):
        name = reserve_name(history, part)
        held = lstat_or_none(folder, name)
        if held is None or not stat.S_ISREG(held.st_mode):
            continue
        try:
            os.unlink(check_name(name), dir_fd=folder)
        except FileNotFoundError:
            continue
        return True
    return False


def _keep_what_fits(folder: int, history: Path, events: Sequence[ServeEvent], lines: Sequence[bytes]) -> None:
    """The reserve all given up and the spool still too large: the fail-safe closes that the space
    free now holds beside the spool being replaced. Never fewer than that spool holds: what it holds
    (an earlier run's, queued first) is not given up for a shorter one."""
    free = _free_bytes(folder) - RESERVE_MARGIN
    kept = _closes_that_fit(events, lines, free)
    before = _closes_held(folder, spool_name(history))
    if len(kept) < before:
        log.error("the disk of the state dir is full: the history's last %d rows are lost; the %d kept "
                  "before are kept", len(events), before)
        return
    log.error("the space left holds %d of the history's last %d rows: the fail-safe answers first; the "
              "rest are lost", len(kept), len(events))
    _replace(folder, spool_name(history), packed(kept))


def _free_bytes(folder: int) -> int:
    info = os.fstatvfs(folder)
    return info.f_bavail * info.f_frsize


def _closes_held(folder: int, name: str) -> int:
    """How many fail-safe closes the spool `name` holds now, read as `load` reads them (0 when there is
    none): what `_closes_that_fit` keeps is closes alone. Counting every line (its arrivals too, served
    again at the next start), a spool of many arrivals and one close was kept over a hundred closes."""
    data = read_small(folder, name, MAX_SPOOL_BYTES)
    held = 0
    for line in _lines(data or b""):
        with contextlib.suppress(Exception):  # a line `load` would skip counts for nothing
            held += _decoded(json.loads(line)).kind == "answered"
    return held


def packed(lines: Sequence[bytes]) -> bytes:
    """A spool's bytes: `COMPRESSED`, then the lines as one zlib stream."""
    return COMPRESSED + zlib.compress(b"".join(lines), 6)


def _closes_that_fit(events: Sequence[ServeEvent], lines: Sequence[bytes], budget: int) -> list[bytes]:
    """What `budget` bytes hold when all of it does not fit: the fail-safe answers (a child read each,
    and only this spool can say so), in the order observed, as many as fit packed (found by halving:
    a few packings of at most the whole). The usual ones are taken
    first in the order observed, a large one (a child's request of up to 1 MiB) after them: taken in
    order, one such first in the queue kept every later close out. Arrivals are left: their files are
    served again at the next start, their rows made then."""
    closes = [line for event, line in zip(events, lines, strict=True) if event.kind == "answered"]
    large = (RESERVE_BYTES - RESERVE_MARGIN) // 16
    first = sorted(range(len(closes)), key=lambda at: (len(closes[at]) > large, at))

    def kept(count: int) -> list[bytes]:
        return [closes[at] for at in sorted(first[:count])]

    fits, beyond = 0, len(closes) + 1  # the first `fits` closes fit; `beyond` do not
    while beyond - fits > 1:
        middle = (fits + beyond) // 2
        if len(packed(kept(middle))) <= budget:
            fits = middle
        else:
            beyond = middle
    return kept(fits)


def keep_reserve(history: Path) -> None:
    """Hold `RESERVE_BYTES` beside `history` in `RESERVE_PARTS` files (written, so the space is really
    taken); best effort: a disk too full for a part now gets it at a later start. The single file an
    older version held is given up first (space for the parts)."""
    size = _part_bytes()
    with Anchor(history.parent, "state dir").folder(create=True) as folder:
        # A folder under a reserve name is the user's, left alone (removing it raised: no part held).
        if (before := lstat_or_none(folder, reserve_name(history))) and not stat.S_ISDIR(before.st_mode):
            remove(folder, reserve_name(history))
        for part in range(RESERVE_PARTS):
            name = reserve_name(history, part)
            held = lstat_or_none(folder, name)
            if held is not None and stat.S_ISDIR(held.st_mode):
                continue
            if held is not None:
                if stat.S_ISREG(held.st_mode) and held.st_size == size:
                    continue
                remove(folder, name)
            try:
                _replace(folder, name, bytes(size))
            except OSError as exc:
                log.warning("no space could be reserved for the history's last rows (%d of %d parts held): "
                            "%s", part, RESERVE_PARTS, exc)
                return


def _replace(folder: int, name: str, data: bytes) -> None:
    temp = temp_name(name)
    try:
        write_new(folder, temp, data)
        os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError:
        with contextlib.suppress(OSError):
            remove(folder, temp)
        raise
    platform.full_fsync(folder)


def load(history: Path) -> list[ServeEvent]:
    """The events spooled beside `history` (none when there is no spool); unreadable lines are skipped."""
    with Anchor(history.parent, "state dir").folder(create=True) as folder:
        data = read_small(folder, spool_name(history), MAX_SPOOL_BYTES)
    events: list[ServeEvent] = []
    unreadable = 0
    for number, line in enumerate(_lines(data or b""), start=1):
        try:
            events.append(_decoded(json.loads(line)))
        except Exception as exc:  # a line this program did not write: the rest still counts
            unreadable += 1
            if unreadable <= _LOGGED_UNREADABLE:
                log.error("history spool line %d is unreadable and skipped: %s", number, type(exc).__name__)
    if unreadable > _LOGGED_UNREADABLE:
        log.error("%d more history spool lines are unreadable and skipped", unreadable - _LOGGED_UNREADABLE)
    return events


def _lines(data: bytes) -> Iterator[bytes]:
    """The JSON lines of a spool, packed or plain. A packed stream that is cut short or damaged gives
    the whole lines before the fault (said in the log); what it unpacks to is held to
    `MAX_SPOOL_BYTES`, as a plain spool is."""
    if not data.startswith(COMPRESSED):
        yield from data.splitlines()
        return
    unpack = zlib.decompressobj()
    rest, held = memoryview(data)[len(COMPRESSED):], 0
    # The line not ended yet, in pieces joined once it ends (joined at each chunk, a long line was copied
    # whole each time: a 64 KiB spool of one 64 MiB line took ~47 s of CPU, 256 MiB some minutes).
    left: list[bytes] = []
    try:
        while rest or unpack.unconsumed_tail:
            source = unpack.unconsumed_tail or rest[:_CHUNK]
            if not unpack.unconsumed_tail:
                rest = rest[_CHUNK:]
            out = unpack.decompress(source, _CHUNK)
            held += len(out)
            if held > MAX_SPOOL_BYTES:
                log.error("the history spool unpacks to over %d bytes: the rest is skipped", MAX_SPOOL_BYTES)
                return
            if b"\n" in out:
                first, *whole, last = out.split(b"\n")
                yield b"".join([*left, first])
                yield from whole
                left = [last]
            else:
                left.append(out)
            if unpack.eof:
                break
    except zlib.error as exc:
        log.error("the history spool is damaged after %d bytes unpacked (%s): the lines before are read",
                  held, exc)
        return
    if not unpack.eof:
        log.error("the history spool is cut short after %d bytes unpacked: the lines before are read", held)
    if line := b"".join(left):
        yield line


def discard(history: Path) -> None:
    with Anchor(history.parent, "state dir").folder(create=True) as folder:
        remove(folder, spool_name(history))


def _encoded(event: ServeEvent) -> dict[str, Any]:
    """One line's object; `raw` (the file's bytes) is left out when they are the request's."""
    request = event.parsed.raw if event.parsed is not None else None
    return {
        "kind": event.kind,
        "session": event.key.session_id,
        "name": event.key.name,
        "at": event.at,
        "request": _b64(request),
        **({} if event.raw == request and request is not None else {"raw": _b64(event.raw)}),
        "response": _b64(encode_response(event.response) if event.response is not None else None),
        "outcome": event.outcome,
        "reason": event.reason,
    }


def _decoded(obj: dict[str, Any]) -> ServeEvent:
    kind = obj["kind"]
    if kind not in ("arrived", "answered") and kind not in NOTES:  # what the queue holds, nothing else
        raise ValueError(f"not a queued event: {kind!r}")
    request, response = _bytes(obj["request"]), _bytes(obj["response"])
    # Nor an event the queue never holds (an arrival or close without its request, a close without its
    # response, a time that is no time): queued, it failed every transaction that wrote the queue, at
    # every start (reconcile raised), and was spooled again at every exit.
    at = float(obj["at"])
    if ((request is None and kind not in NOTES) or (kind == "answered" and response is None)
            or not math.isfinite(at)):
        raise ValueError(f"not a queued event: {kind!r} without its request, response or time")
    raw = _bytes(obj["raw"]) if "raw" in obj else request
    reason = obj["reason"]
    return ServeEvent(
        kind=kind,
        key=AskKey(str(obj["session"]), str(obj["name"])),
        at=at,
        parsed=parse_request(request) if request is not None else None,
        response=ForwardedResponse.model_validate_json(response) if response is not None else None,
        outcome=obj["outcome"],
        reason=None if reason is None else str(reason),
        raw=raw,
    )


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _bytes(text: object) -> bytes | None:
    return None if text is None else base64.b64decode(str(text), validate=True)
