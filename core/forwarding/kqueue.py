"""Change notification on macOS and the BSDs: kqueue's vnode events on the served inbox folders wake
the listing watcher (`core.forwarding.poll`) at once instead of at its next interval.

kqueue watches an open descriptor, not a path, so each watched folder (opened by descriptor from the
root, never through a link) is held open: `sessions/`, and each served session's folder and its
`requests/`. An event only says "a folder changed"; the listing that follows says what, so nothing a
coalesced event hides is lost, and the listing still runs every `POLL_S` without one. It imports
anywhere (`select.kqueue` is looked up only when a wake is built, which `core.platform.watch_backend`
allows only where kqueue exists).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
from collections.abc import Iterable
from typing import Any

from core.clock import SYSTEM_CLOCK, Clock, wait_either
from core.disk.tree import Anchor

Parts = tuple[str, ...]
_KQ: Any = select
"""`select`, its kqueue names unseen where they are missing (type checked on Linux too)."""


class FolderWake:
    """Wakes `wait` as soon as an entry is added to, removed from or renamed in a watched folder."""

    def __init__(self, tree: Anchor) -> None:
        self._tree = tree
        self._kq = _KQ.kqueue()
        self._held: dict[Parts, int] = {}
        self._woken = asyncio.Event()
        self._fflags = (_KQ.KQ_NOTE_WRITE | _KQ.KQ_NOTE_DELETE | _KQ.KQ_NOTE_RENAME
                        | _KQ.KQ_NOTE_ATTRIB)
        asyncio.get_running_loop().add_reader(self._kq.fileno(), self._on_readable)

    def arm(self, folders: Iterable[Parts]) -> None:
        """Watch exactly `folders` (one missing or a link is skipped until the next `arm`); a held
        folder that was removed since is let go and opened anew."""
        wanted = set(folders)
        for parts, fd in list(self._held.items()):
            if parts not in wanted or _removed(fd):
                del self._held[parts]
                os.close(fd)  # its kevent goes with it
        for parts in wanted - self._held.keys():
            try:
                fd = self._tree.open(parts)
            except OSError:  # missing, or `UnsafeFolder`: the listing reports nothing there either
                continue
            event = _KQ.kevent(fd, filter=_KQ.KQ_FILTER_VNODE, flags=_KQ.KQ_EV_ADD | _KQ.KQ_EV_CLEAR,
                               fflags=self._fflags)
            try:
                self._kq.control([event], 0, 0)
            except OSError:
                os.close(fd)
                continue
            self._held[parts] = fd

    async def wait(self, stop: asyncio.Event, at_most_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        """Until a change, `stop`, or `at_most_s` seconds on `clock`; a change seen before counts too."""
        await wait_either(self._woken, stop, at_most_s, clock)
        self._woken.clear()

    def _on_readable(self) -> None:
        with contextlib.suppress(OSError):
            self._kq.control(None, 256, 0)
        self._woken.set()

    def close(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self._kq.fileno())
        for fd in self._held.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._held.clear()
        self._kq.close()


def _removed(fd: int) -> bool:
    try:
        return os.fstat(fd).st_nlink == 0
    except OSError:
        return True
