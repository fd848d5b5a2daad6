"""Intake: an inbox listed and its new files read, parsed and checked, in one trip off the event loop.

Every file is read through one descriptor of `requests/` (never through a link, never blocking on a
FIFO), at most `INTAKE_FILES` files and `READ_BUDGET` bytes a trip; each id read is looked up in
`responses/` (a `stat` each, through one descriptor: a folder of thousands of answered names is
never listed per trip) and the ledger asked once for the verdicts it already holds. Any failure of
one file becomes that file's rejection (it is quarantined with the reason); a refused folder raises
`UnsafeFolder`.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import NamedTuple

from core.disk.paths import is_safe_request_id
from core.disk.tree import require_folder_or_absent
from core.forwarding import outbox
from core.forwarding.inbox import (
    FileIdentity,
    SessionInbox,
    UnreadableRequest,
    display_name,
    read_request_identified,
)
from core.serving.verdicts import Ledger, VerdictRecord, VerdictRow
from core.text import log_safe
from core.vocabulary.asks import Judgment
from core.wire.reader import RequestRejected, parse_unplain, read_plain
from core.wire.request import ParsedRequest

log = logging.getLogger("pi_authorizer.serve")

#: Files one intake trip reads: small enough that a burst is judged while its first files are being
#: committed (the publisher then takes everything queued, up to `MAX_BATCH`, as one batch).
INTAKE_FILES = 256
#: Files a later trip of a burst reads when it judges the asks decided at once (`core.serving.at_once`):
#: their judgment and their batch then share one thread, and a batch's own costs (its transactions, the
#: looks it makes once, the folder's flush) are spread over more asks.
SETTLE_FILES = 1024
#: Request bytes one intake trip may hold (with at most `INTAKE_FILES` files): memory stays bounded.
READ_BUDGET = 32 << 20
#: Bytes of a `responses/` folder's size per name looked for, at most, for it to be listed once rather
#: than each name looked up (`existing_responses`): a folder's size grows with its entries (tmpfs 20
#: bytes each, ext4 and btrfs more: listed less often), and listing one entry costs about a seventh of
#: a look. A folder whose size says nothing (0) is never listed.
LIST_BYTES = 100
#: How long before a listing `requests/` must have last changed for its listing to be reused while
#: the folder's identity and times stay the same (`Listing`): any file created, renamed in or removed
#: after the listing then gives the folder a later time (far more than the coarsest timestamp tick).
SETTLED_S = 2.0


@dataclass(frozen=True)
class Listing:
    """What a listing of `requests/` found, and the folder as it was then (device, inode, modified
    and changed times in ns): a safety pass reuses the names while the folder is exactly as it was,
    when it had last changed `SETTLED_S` before that listing (else it lists again)."""

    stamp: tuple[int, int, int, int]
    names: list[str]
    settled: bool


class FileRead(NamedTuple):
    """One request file as read off the event loop: gone, unusable (with why), or parsed. A plain
    tuple: a burst makes one per file (a frozen dataclass cost twice as much to make)."""

    gone: bool = False
    raw: bytes | None = None
    parsed: ParsedRequest | None = None
    rejection: str | None = None
    #: The file read (inode, size, mtime): another file under the name later is another ask.
    identity: FileIdentity | None = None


@dataclass(frozen=True)
class Intake:
    """What one trip off the event loop found: the files read (in order), the `<id>.json` of the ids
    read that are already in `responses/`, and the verdicts the ledger holds for those ids."""

    reads: list[tuple[str, FileRead]]
    responses: frozenset[str]
    recorded: dict[str, VerdictRow]
    #: Of `responses`, those holding the bytes recorded for their id, or a start of them (this node's
    #: answer, or what a power cut left of it: `SessionInbox.response_is`'s `or_cut_short`).
    ours: frozenset[str] = frozenset()
    #: Of `ours`, those holding exactly the recorded bytes (a cut-short one is only this node's when it
    #: may have placed it: `Reconcile.earlier`).
    exact: frozenset[str] = frozenset()
    #: The verdicts of the asks of this intake decided at once in its trip (`core.serving.at_once`),
    #: each read at `VerdictRecord.arrived`; `reads` holds the others.
    at_once: list[VerdictRecord] = field(default_factory=list)
    #: What the trip's judgment said of the others it judged (by name): an ask no one decides at once
    #: (the route takes it without judging again), or the failure of its judgment (the file is
    #: quarantined with it; a judge is never asked twice).
    judged: dict[str, Judgment | Exception] = field(default_factory=dict)

    @property
    def taken(self) -> int:
        """How many of the names asked for this trip took in (read, and decided at once)."""
        return len(self.reads) + len(self.at_once)


@dataclass(frozen=True)
class Scan:
    """One listing of an inbox: its names (None: the inbox does not exist); of the asks still awaiting
    a decision, the names now holding another file (`replaced`: renamed over, or rewritten); and the
    first batch of the files to read (new names, and the replaced ones)."""

    names: list[str] | None
    replaced: frozenset[str] = frozenset()
    intake: Intake | None = None
    #: The names to read, in listing order: new, or replaced.
    new: list[str] = field(default_factory=list)
    #: The listing itself (a later safety pass may reuse it).
    listing: Listing | None = None

    @property
    def to_read(self) -> list[str]:
        if self.intake is None:
            return []
        return [name for name, _ in self.intake.reads] + [v.key.name for v in self.intake.at_once]


Serve = Callable[[SessionInbox, "Intake"], "Intake"]
"""What a trip does with an intake before it returns (`core.serving.at_once`: the asks decided at once)."""


def scan(
    inbox: SessionInbox, known: frozenset[str], ledger: Ledger | None,
    watched: Mapping[str, FileIdentity] | None = None, check: Collection[str] | None = None,
    kept: Listing | None = None, serve: Serve | None = None,
) -> Scan:
    """List the inbox, find which of the `watched` files (name: the identity read) now hold another
    file, and read the first batch of the files not in `known` or replaced. `check`: only these of
    the watched names are looked at again this time (a safety rescan spreads them over its passes);
    None: all of them. `kept`: the last listing, reused when the folder is unchanged since (`Listing`;
    the files of `check` are looked at all the same: a file rewritten in place leaves its folder be)."""
    listing = list_requests(inbox, kept)
    if listing is None:
        return Scan(None)
    names = listing.names
    listed = set(names)
    replaced: frozenset[str] = frozenset()
    if watched:
        looked = listed.intersection(watched if check is None else check).intersection(watched)
        now = inbox.identities(looked)
        replaced = frozenset(name for name, identity in now.items()
                             if identity is not None and identity != watched[name])
    # Set work, not a loop over thousands of names: the listing is sorted, so is what it adds.
    new = sorted(listed.difference(known).union(replaced))
    intake = take_in(inbox, new[:INTAKE_FILES], ledger, serve) if new else None
    return Scan(names, replaced, intake, new, listing)


def list_requests(inbox: SessionInbox, kept: Listing | None = None) -> Listing | None:
    """`SessionInbox.listed_requests` (the same checks: `UnsafeFolder` for a link or a non-folder on
    the way, None without the inbox), with `kept` reused while `requests/` is unchanged since it."""
    try:
        with inbox.tree.folder(("sessions", inbox.folder_name)) as session_fd:
            require_folder_or_absent(session_fd, "responses", str(inbox.responses_dir))
        with inbox.folder("requests") as fd:
            before = time.time_ns()
            info = os.fstat(fd)
            stamp = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
            if kept is not None and kept.settled and kept.stamp == stamp:
                return kept
            names = sorted(name for name in os.listdir(fd) if name.endswith(".json"))
    except FileNotFoundError:
        return None
    settled = before - max(info.st_mtime_ns, info.st_ctime_ns) > SETTLED_S * 1e9
    return Listing(stamp, names, settled)


def take_in(
    inbox: SessionInbox, names: Sequence[str], ledger: Ledger | None, serve: Serve | None = None
) -> Intake:
    """FileRead and parse up to `READ_BUDGET` bytes of the named files (at least one), through one
    descriptor of `requests/`; then look up their responses and recorded verdicts, once for all, and
    `serve` what it takes of them. Raises `UnsafeFolder` when a folder of the session tree is refused."""
    reads: list[tuple[str, FileRead]] = []
    held = 0
    try:
        fd = inbox.tree.open(("sessions", inbox.folder_name, "requests"))
    except FileNotFoundError:
        return Intake([(name, FileRead(gone=True)) for name in names], frozenset(), {})
    try:
        for name in names:
            read = read_guarded(fd, name)
            reads.append((name, read))
            held += len(read.raw or b"")
            if held >= READ_BUDGET:
                break
    finally:
        os.close(fd)
    ids = [read.parsed.request.id for _, read in reads if read.parsed is not None]
    responses = existing_responses(inbox, ids)
    recorded: dict[str, VerdictRow] = {}
    if ledger is not None and ids:
        try:
            recorded = ledger.recorded_verdicts(inbox.session_id, ids)
        except Exception as exc:
            # Counts as none recorded: publication never replaces a response, and recording the
            # new verdict fails safe.
            log.error("session=%s: reading the history failed: %s", log_safe(inbox.session_id), exc)
    ours = frozenset(
        name for name in responses
        if (verdict := recorded.get(name.removesuffix(".json"))) is not None
        and inbox.response_is(name.removesuffix(".json"), verdict.body, or_cut_short=True)
    )
    # Read again: only the responses of recorded ids (a restart's), rare.
    exact = frozenset(name for name in ours
                      if inbox.response_is(stem := name.removesuffix(".json"), recorded[stem].body))
    intake = Intake(reads, responses, recorded, ours, exact)
    return intake if serve is None else serve(inbox, intake)


def existing_responses(inbox: SessionInbox, request_ids: Iterable[str]) -> frozenset[str]:
    """`<id>.json` for each id whose response is already in `responses/` (whatever the entry is: it
    is never followed). An id that is not a safe file name is skipped: its request is refused before
    anything looks at responses (`rejection`).

    A folder whose watch vouches for what it holds is asked that (`core.forwarding.outbox`: the names
    it may hold, each looked at). Else a small `responses/` (its size at most `LIST_BYTES` per name
    looked for) is listed once, or each name is looked up (a look costs as much as listing ~7 entries:
    `docs/design/serving-speed.md`, fifth pass). Each is what the folder held a moment before the trip
    goes on: a response written after it is found by the answer's no-replace link, as before."""
    names = response_names(request_ids)
    try:
        with inbox.folder("responses") as fd:
            if (seen := outbox.existing(fd, names)) is not None:  # the folder's watch vouches for it
                return seen
            if 0 < os.fstat(fd).st_size <= LIST_BYTES * len(names):
                with suppress(OSError):  # (a listing refused: each name is looked up instead)
                    return frozenset(set(os.listdir(fd)).intersection(names))
            # A look that raises nothing for the usual answer, "not there" (an `lstat` raising for
            # it cost a burst more than the look itself). A look that fails otherwise (a folder
            # refused) says "not there" too: the answer's no-replace link then finds what is there
            # (a response someone else wrote is set aside as forged), or waits for the disk; nothing
            # is ever replaced.
            return frozenset(name for name in names
                             if os.access(name, os.F_OK, dir_fd=fd, follow_symlinks=False))
    except FileNotFoundError:
        return frozenset()


def response_names(request_ids: Iterable[str]) -> list[str]:
    """`<id>.json` of each id that is a safe file name (`is_safe_request_id`), in order: a trip's ids
    are checked all at once, joined by a character none may hold (so none holds it when the joined
    text holds it that many times), and one by one only when one fails."""
    ids = list(request_ids)
    joined = "/".join(ids)
    if (_SAFE_IDS.fullmatch(joined) is not None and joined.count("/") == len(ids) - 1
            and "." not in ids and ".." not in ids):
        return [f"{request_id}.json" for request_id in ids]
    return [f"{request_id}.json" for request_id in ids if is_safe_request_id(request_id)]


#: Safe request ids (`core.disk.paths.SAFE_REQUEST_ID`) joined by `/`, which none may hold.
_SAFE_IDS = re.compile(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*")


def read_guarded(dir_fd: int, name: str) -> FileRead:
    """One file read and parsed; any failure becomes a rejection, so one file never fails a batch."""
    try:
        raw, identity = read_request_identified(dir_fd, name)
    except FileNotFoundError:
        return FileRead(gone=True)
    except UnreadableRequest as exc:
        return FileRead(rejection=f"request file {exc.reason}")
    except Exception as exc:
        return FileRead(rejection=f"reading this file failed ({type(exc).__name__}: {exc})")
    try:
        # `FileRead(raw=raw, parsed=parse_request(raw), identity=identity)`: the tuples made in C (a
        # named tuple's `__new__` is a Python function taking keywords; one per file of a burst), and
        # `parse_request`'s first step in place.
        plain = read_plain(raw)
        parsed = parse_unplain(raw) if plain is None else _new_tuple(ParsedRequest, (plain, raw, {}))
        return _new_tuple(FileRead, (False, raw, parsed, None, identity))
    except RequestRejected as exc:
        return FileRead(raw=raw, rejection=f"unusable request: {exc.reason}", identity=identity)
    except Exception as exc:
        return FileRead(raw=raw, rejection=f"reading this file failed ({type(exc).__name__}: {exc})",
                        identity=identity)


_new_tuple = tuple.__new__


def rejection(name: str, read: FileRead, session_id: str) -> str | None:
    """Why a file that was read cannot be served as a request of `session_id` (None: it can)."""
    stem = name.removesuffix(".json")
    if not is_safe_request_id(stem):
        return f"file name {display_name(name)!r} is not a request id (^[A-Za-z0-9._-]+$, not . or ..)"
    if read.parsed is None:
        return read.rejection or "unusable request"
    request = read.parsed.request
    if request.id != stem:
        return f"request id {request.id!r} does not match its file name"
    target = request.target_session_id.strip()
    if target != session_id:
        return f"request targets session {target!r} but was found in the inbox of {session_id!r}"
    return None
