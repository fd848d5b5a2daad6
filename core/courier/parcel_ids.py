"""Parcel ids a courier mints: random, so no child can compute one, and kept by the ask's identity so
a courier restarted after a kill carries the same file under the same id (the ask is asked once).

Before, a parcel id was a hash of what the child wrote: a child could compute it and plant an
approving answer at the target before asking (issue 33). Now the id holds 128 random bits this node
keeps in its state dir (`<state>/parcels/<identity>`, owner-only), written before the ask is carried.
An id minted now is `fresh`: an answer found at the target before this node wrote the request there
was not written for it, and is never relayed. Records older than `KEEP_S` are pruned (no child waits
that long).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path

#: How long a minted id is kept: longer than any child waits for its answer.
KEEP_S = 2 * 24 * 3600.0
_ID_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Minted:
    parcel_id: str
    #: Minted now, not read back from an earlier run: nothing at the target can be an answer to it yet.
    fresh: bool


class ParcelIds:
    """Mints and remembers parcel ids; `folder=None` keeps them in memory (one run only)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self._memory: dict[str, str] = {}
        if folder is not None:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.prune()

    def mint(self, identity: str) -> Minted:
        """The id for the ask named by `identity` (a hex digest of what identifies it): the one kept,
        else a new one, kept durably before it is returned. Blocking I/O: call it off the loop."""
        kept = self._memory.get(identity) or self._read(identity)
        if kept is not None:
            self._memory[identity] = kept
            return Minted(kept, fresh=False)
        parcel_id = f"courier-{secrets.token_hex(20)}"
        self._write(identity, parcel_id)
        self._memory[identity] = parcel_id
        return Minted(parcel_id, fresh=True)

    def prune(self, now: float | None = None) -> int:
        """Remove records older than `KEEP_S`; how many went."""
        if self.folder is None:
            return 0
        limit = (time.time() if now is None else now) - KEEP_S
        gone = 0
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.folder):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_mtime < limit:
                        os.unlink(entry.path)
                        gone += 1
        return gone

    def _path(self, identity: str) -> Path | None:
        if self.folder is None or not identity or not set(identity) <= _ID_CHARS:
            return None
        return self.folder / identity

    def _read(self, identity: str) -> str | None:
        path = self._path(identity)
        if path is None:
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            text = os.read(fd, 256).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        valid = text.startswith("courier-") and len(text) == 48 and set(text[8:]) <= _ID_CHARS
        return text if valid else None

    def _write(self, identity: str, parcel_id: str) -> None:
        path = self._path(identity)
        if path is None:
            return
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, parcel_id.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(temp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            if exc.errno != errno.ENOENT:
                raise


def ask_identity(*parts: str, raw: bytes) -> str:
    """What identifies one ask across restarts (its session, file name, request id, `createdAt`, its
    bytes), as a hex digest: the key its minted id is kept under, never the id itself."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    digest.update(raw)
    return digest.hexdigest()
