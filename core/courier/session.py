"""The `session:ID` transport: carry an ask into another session's inbox under the same forwarding
root, exactly as a forwarding child writes it (`docs/design/contract.md` § Layout), and read its answer
with the child's reader.

The request written there is the child's file byte for byte, with one object's worth of keys spliced
in before its final `}`: `id` (the parcel id, which is the file name), `targetSessionId` (the target,
so its server takes the ask as addressed to it) and `hops`. JSON readers, the reference's and ours,
take the last of a repeated key, so the node up there reads this hop's envelope and the child's
unchanged facts (`accessIntent`, `principal`), and ignores nothing it needs.

Whether anyone serves the target is its heartbeat (`serving/<enc(ID)>.json`): stale or from a dead
process before carrying means nobody, at once; none at all (a 20.7.3 server keeps none) gets a grace of
two seconds for the request to be taken, as a newer child waits, and then counts as nobody. A server
seen serving that goes away while an ask waits there has five seconds (the heartbeat's stale
interval) to come back, as a restarted one does, and answer it. Folders are opened
one by one without following a link, so a target's inbox cannot send the parcel elsewhere.

An answer found there is its writer's claim. One that was there before this node carried a freshly
minted parcel, that predates (by its inode's change time, which no writer can set back) the request
this node wrote, or that names another responder than the target, was not written by the target's
server for this parcel: it counts as no answer (the fallback, with the reason), never as a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.courier.transport import Carried, Parcel, Relayed, Unreachable, decider_words
from core.disk.paths import encode_session_id, is_safe_request_id
from core.forwarding.liveness import HEARTBEAT_STALE_MS, heartbeat_path, parse_heartbeat
from core.text import log_safe
from core.wire.base import compact_json
from core.wire.limits import MAX_REQUEST_BYTES
from core.wire.response import ReadResponse, parse_response

log = logging.getLogger("pi_authorizer.courier")

#: How long a target with no heartbeat has to take the request before it counts as not served.
UNSERVED_GRACE_S = 2.0
#: How long a target seen serving may be without a live heartbeat (restarting) while an ask waits
#: there: the heartbeat's own stale interval.
RESTART_GRACE_S = HEARTBEAT_STALE_MS / 1000
#: How often the target's inbox is looked at (a child polls every 250 ms; one look serves every
#: carry waiting there).
POLL_S = 0.05
#: The most of a response read: the reference's responses are a few hundred bytes.
MAX_RESPONSE_BYTES = 64 * 1024

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class _Look:
    """One look at the target: the names in its `responses/` (None: not listable) and `requests/`,
    and its heartbeat."""

    responses: frozenset[str] | None
    requests: frozenset[str]
    beat: str | None


class SessionCourier:
    """Carries parcels into `session:ID`'s inbox and waits for its responses there."""

    def __init__(self, root: Path, session_id: str, clock: Clock, grace_s: float = UNSERVED_GRACE_S) -> None:
        self.target = f"session:{session_id}"
        self.session_id = session_id
        self.root = root
        self.clock = clock
        self.grace_s = grace_s
        self._inbox = ("sessions", encode_session_id(session_id))
        self._looking: asyncio.Future[_Look] | None = None

    async def carry(self, parcel: Parcel) -> Relayed:
        if not is_safe_request_id(parcel.parcel_id):
            raise Unreachable(f"{self.target}: parcel id {parcel.parcel_id!r} is not a legal file name")
        name = f"{parcel.parcel_id}.json"
        relayed = await asyncio.to_thread(self._response, name, await asyncio.to_thread(self._asked_ns, name))
        if isinstance(relayed, str) or (relayed is not None and parcel.fresh):
            await asyncio.to_thread(self._remove, name)
            why = relayed if isinstance(relayed, str) else "it was there before this node carried the ask"
            raise self._forged(parcel.parcel_id, why)
        if relayed is not None:
            return relayed  # answered before a restart: the same verdict, never asked again
        beat = await asyncio.to_thread(self._served)
        if beat in ("stale", "dead_pid"):
            raise Unreachable(f"nobody serves {self.target} (its heartbeat is {beat.replace('_', ' ')})")
        #: When someone was last seen serving the target (a fresh heartbeat, or the request taken);
        #: from before the request is written, so the grace is never longer than it says.
        seen, seen_alive = self.clock.monotonic(), beat == "alive"
        try:
            written, asked_ns = await asyncio.to_thread(self._write_request, name, self._body(parcel))
        except OSError as exc:
            raise Unreachable(f"the ask could not be written into {self.target} ({_why(exc)})") from exc
        log.info("%s: parcel %s %s", log_safe(self.target), parcel.parcel_id,
                 "carried" if written else "already there (carried before a restart)")
        while True:
            look = await self._next_look()
            if look.responses is None or name in look.responses:
                relayed = await asyncio.to_thread(self._response, name, asked_ns)
                if isinstance(relayed, str):
                    await asyncio.to_thread(self._remove, name)
                    raise self._forged(parcel.parcel_id, relayed)
                if relayed is not None:
                    return relayed
            if wall_ms(self.clock) >= parcel.deadline_ms:
                await asyncio.to_thread(self._remove, name)
                raise Unreachable(f"{self.target} did not answer before the child's deadline")
            if look.beat == "alive" or name not in look.requests:
                seen, seen_alive = self.clock.monotonic(), seen_alive or look.beat == "alive"
                continue
            # Not served now. A server seen before may be restarting (the ask waits in its inbox
            # for it): it has the heartbeat's own stale interval to come back.
            limit = RESTART_GRACE_S if seen_alive else self.grace_s
            if self.clock.monotonic() - seen >= limit:
                await asyncio.to_thread(self._remove, name)
                state = (look.beat or "gone").replace("_", " ")
                raise Unreachable(f"{self.target} stopped serving (its heartbeat is {state} for "
                                  f"{limit:g}s)" if seen_alive else
                                  f"nobody serves {self.target} (no heartbeat, and the ask was not "
                                  f"taken within {limit:g}s)")

    def _forged(self, parcel_id: str, why: str) -> Unreachable:
        reason = (f"the answer found in {self.target} for parcel {parcel_id} was not written by its server "
                  f"for this ask ({why}): never relayed")
        log.error("%s", log_safe(reason, 400))
        return Unreachable(reason)

    async def withdraw(self, parcel_id: str, reason: str) -> None:
        """Remove the request (and a response nobody will read) from the target's inbox."""
        if is_safe_request_id(parcel_id):
            await asyncio.to_thread(self._remove, f"{parcel_id}.json")
            log.info("%s: parcel %s withdrawn (%s)", log_safe(self.target), parcel_id, log_safe(reason))

    async def abandon(self, carried: Carried, reason: str) -> None:
        """The request is removed from the target's inbox (an answer there is nobody's to read)."""
        await self.withdraw(carried.parcel_id, reason)

    async def owed(self, parcel_id: str) -> None:
        """Nothing is ever owed: a withdrawal here is done before `withdraw` returns."""

    async def close(self) -> None:
        """Nothing is held between carries."""

    async def _next_look(self) -> _Look:
        """The next look at the target's inbox, one for every carry waiting on it (a tick lists its two
        folders and reads its heartbeat once, however many asks wait there)."""
        if self._looking is None or self._looking.done():
            self._looking = asyncio.ensure_future(self._look_after(POLL_S))
        return await asyncio.shield(self._looking)

    async def _look_after(self, delay: float) -> _Look:
        await asyncio.sleep(delay)
        return await asyncio.to_thread(self._look)

    def _look(self) -> _Look:
        return _Look(self._names("responses"), self._names("requests") or frozenset(), self._served())

    def _names(self, sub: str) -> frozenset[str] | None:
        """The names in one of the target's folders; None when it cannot be listed (read each answer
        directly then, which says why)."""
        try:
            with self._folder((*self._inbox, sub)) as fd:
                return frozenset(os.listdir(fd))
        except FileNotFoundError:
            return frozenset()
        except OSError:
            return None

    # -- the target's inbox, by descriptor -------------------------------------------------------

    def _body(self, parcel: Parcel) -> bytes:
        body = splice(parcel.request, {
            "id": parcel.parcel_id,
            "targetSessionId": self.session_id,
            "hops": [{"host": h.host, "sessionId": h.session_id, "node": h.node} for h in parcel.hops],
        })
        if len(body) > MAX_REQUEST_BYTES:
            raise Unreachable(f"the ask is {len(body)} bytes with its hops, over what {self.target} reads")
        return body

    def _served(self) -> str | None:
        """The target's heartbeat: `alive`, `stale`, `dead_pid`, or None when it keeps none."""
        try:
            with self._folder(("serving",)) as fd:
                data = _read_small(fd, heartbeat_path(self.root, self.session_id).name, 64 * 1024)
        except OSError:
            return None
        record = None if data is None else parse_heartbeat(data)
        if record is None:
            return None
        # Another process's record, dated by its writer's wall clock: judged by the same clock (a test's
        # manual clock measures this node's waits, not another process's beats).
        return record.state(wall_ms(SYSTEM_CLOCK))

    @contextlib.contextmanager
    def _folder(self, parts: tuple[str, ...], create: bool = False) -> Iterator[int]:
        """A folder under the root, each step opened without following a link (mkdir -p as the child)."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                step = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = step
            yield fd
        finally:
            os.close(fd)

    def _write_request(self, name: str, body: bytes) -> tuple[bool, int]:
        """Temp file and rename, as the child writes; False when the parcel is there already. With the
        request's change time (ns): no answer to it can be older."""
        with self._folder((*self._inbox, "responses"), create=True):
            pass
        with self._folder((*self._inbox, "requests"), create=True) as fd:
            try:
                return False, os.stat(name, dir_fd=fd, follow_symlinks=False).st_ctime_ns
            except FileNotFoundError:
                pass
            temp = f"{name}.{os.getpid()}.{time.time_ns() // 1_000_000}.tmp"
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                          dir_fd=fd)
            try:
                with os.fdopen(out, "wb") as handle:
                    handle.write(body)
                os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
                asked_ns = os.stat(name, dir_fd=fd, follow_symlinks=False).st_ctime_ns
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=fd)
                raise
            return True, asked_ns

    def _asked_ns(self, name: str) -> int:
        """The change time (ns) of this parcel's request already at the target (0: none there)."""
        try:
            with self._folder((*self._inbox, "requests")) as fd:
                return os.stat(name, dir_fd=fd, follow_symlinks=False).st_ctime_ns
        except OSError:
            return 0

    def _response(self, name: str, asked_ns: int = 0) -> Relayed | str | None:
        """The target's response, read as a child reads it; anything a child could not read (garbage,
        too large, a link, not a file) is a denial whose reason says so, never an approval. One that
        was not written for this parcel by the target's server is why, in words (a forgery)."""
        try:
            with self._folder((*self._inbox, "responses")) as fd:
                try:
                    found = _read_small_dated(fd, name, MAX_RESPONSE_BYTES)
                except OSError as exc:
                    return self._unreadable(_why(exc))
        except FileNotFoundError:
            return None
        except OSError as exc:
            return self._unreadable(f"its responses folder cannot be opened ({_why(exc)})")
        if found is None:
            return None
        data, changed_ns = found
        if changed_ns < asked_ns:
            return "it predates the request this node wrote there"
        response = parse_response(data)
        if response is None:
            return self._unreadable("not a response a child can read")
        if response.approved != response.state.startswith("approved"):
            return self._unreadable(f"approved={response.approved} contradicts state {response.state!r}")
        if response.responder_session_id != self.session_id:
            return f"it names {response.responder_session_id!r} as its responder, not {self.session_id!r}"
        return Relayed(response, decider_words(response))

    def _unreadable(self, why: str) -> Relayed:
        reason = f"the answer from {self.target} could not be read ({why}); denied for safety"
        log.warning("%s", log_safe(reason, 400))
        denial = ReadResponse(approved=False, state="denied_with_reason",
                              responder_session_id=self.session_id, responded_at=None,
                              denial_reason=reason, decided_by=None)
        return Relayed(denial, f"nobody (unreadable answer at {self.target})")

    def _remove(self, name: str) -> None:
        for sub in ("requests", "responses"):
            try:
                with self._folder((*self._inbox, sub)) as fd, contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    log.warning("%s: could not remove %s/%s: %s", log_safe(self.target), sub, name, exc)


def splice(request: bytes, keys: dict[str, object]) -> bytes:
    """The request's bytes unchanged, with `keys` added as members before its final `}`: every byte
    of the child's kept (a repeated key is read as its last occurrence, so these win)."""
    end = request.rstrip(b" \t\r\n")
    if not end.endswith(b"}"):
        raise Unreachable("the request is not a JSON object")
    members = compact_json(keys)[1:-1]
    inner = end[:-1]
    joiner = b"" if inner.rstrip(b" \t\r\n").endswith(b"{") else b","
    return inner + joiner + members + b"}"


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _read_small_dated(fd: int, name: str, limit: int) -> tuple[bytes, int] | None:
    """`_read_small`, with the file's change time (ns) read from the same descriptor."""
    try:
        handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = os.read(handle, limit + 1)
    finally:
        os.close(handle)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"over {limit} bytes")
    return data, info.st_ctime_ns


def _read_small(fd: int, name: str, limit: int) -> bytes | None:
    """A regular file's bytes, never through a link, at most `limit` (over it raises EFBIG); None when
    absent."""
    try:
        handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = os.read(handle, limit + 1)
    finally:
        os.close(handle)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"over {limit} bytes")
    return data


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a symbolic link"
    if exc.errno == errno.ENOTDIR:  # a folder opened without following links: a link, or a file
        return "a folder on its path is a symbolic link or not a folder"
    return exc.strerror or str(exc)
