"""The asks this courier carried and has not answered yet, kept in its state dir (`<state>/carried/`),
so a courier killed while its children waited knows them at its next start.

A child that gave up while no courier ran removed its request and read nothing from this node; the
target may have decided meanwhile. At start, a kept ask whose request is gone is withdrawn at the
target (`Courier.abandon`), and a verdict that won there is noted as not delivered, as the fallback
does. One small file per ask in flight, written before the parcel is carried and removed once the
courier answers (or the child withdraws) and nothing is owed at the target (a withdrawal the broker
could not take yet: `Courier.owed`); not fsynced: a kill keeps it, only a machine crash may not.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from core.courier.parcel_ids import KEEP_S
from core.courier.transport import Carried
from core.disk.paths import encode_session_id
from core.vocabulary.asks import AskKey

_HEX = frozenset("0123456789abcdef")


class CarriedAsks:
    """Kept asks in flight, one file per parcel id; `folder=None` keeps nothing (one run only)."""

    def __init__(self, folder: Path | None = None, root: Path | None = None) -> None:
        self.folder = folder
        #: The forwarding root the asks' request files are in (`sessions/<id>/requests/<name>`).
        self.root = root
        if folder is not None:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def keep(self, carried: Carried) -> None:
        """Kept before the parcel is carried. Blocking I/O: call it off the loop."""
        path = self._path(carried.parcel_id)
        if path is None:
            return
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, json.dumps(carried.__dict__, separators=(",", ":")).encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(temp, path)

    def done(self, parcel_id: str) -> None:
        """The courier answered (or the child withdrew): nothing is left to tell the target at start."""
        path = self._path(parcel_id)
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def kept(self) -> list[Carried]:
        """The asks an earlier run left in flight (records older than `KEEP_S` are removed: no child
        waits that long). Blocking I/O."""
        if self.folder is None:
            return []
        found: list[Carried] = []
        limit = time.time() - KEEP_S
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.folder):
                if entry.name.startswith("."):
                    continue
                with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                    if entry.stat(follow_symlinks=False).st_mtime < limit:
                        os.unlink(entry.path)
                        continue
                    with open(entry.path, "rb") as file:
                        value = json.loads(file.read(64_000))
                    carried = Carried(**{k: str(value[k]) for k in Carried.__dataclass_fields__})
                    if carried.parcel_id == entry.name:
                        found.append(carried)
        return found

    def request_present(self, carried: Carried) -> bool:
        """Whether the ask's request file is still in its inbox (its child still waits). Unknown (no
        root, an unsafe name): present, so nothing is withdrawn on a guess."""
        name = carried.name
        if self.root is None or not name or "/" in name or "\0" in name or name.startswith("."):
            return True
        path = self.root / "sessions" / encode_session_id(carried.session_id) / "requests" / carried.name
        try:
            return path.exists()
        except OSError:
            return True

    def _path(self, parcel_id: str) -> Path | None:
        minted = parcel_id.startswith("courier-") and set(parcel_id[8:]) <= _HEX and len(parcel_id) > 8
        if self.folder is None or not minted:
            return None
        return self.folder / parcel_id


def carried_of(parcel_id: str, key: AskKey, host: str, request_id: str, digest: str) -> Carried:
    """The record of one ask carried from `key` (its session's inbox) on `host`."""
    return Carried(parcel_id, host, key.session_id, key.name, request_id, digest)
