"""The forwarding root's watcher where inotify is missing (`core.forwarding.watch` falls back): list each
folder every `POLL_S` and report the session folders whose entries changed; on macOS a kqueue wake
(`core.forwarding.kqueue`) lists them as soon as one changes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable

from core.clock import SYSTEM_CLOCK, Clock
from core.disk.tree import Anchor
from core.forwarding.kqueue import FolderWake

POLL_S = 0.25
RESCAN_ALL: frozenset[str] = frozenset()
"""Yielded when the watcher cannot say which folders changed (start, overflow, restart)."""


async def polled_changes(
    tree: Anchor,
    stop: asyncio.Event,
    clock: Clock = SYSTEM_CLOCK,
    wanted: Callable[[str], bool] = lambda _: True,
    wake: FolderWake | None = None,
) -> AsyncIterator[set[str]]:
    """Where inotify is missing: list `sessions/`, each session folder and its `requests/` every
    `POLL_S` on `clock` (the reference's own poll interval), each by descriptor and without
    recursion, and yield the folders whose entries changed. The first yield is a full rescan. A
    `wake` watching the listed folders ends each wait as soon as one of them changes."""
    seen = _listing(tree, wanted)
    yield set(RESCAN_ALL)
    while not stop.is_set():
        if wake is None:
            await clock.wait(stop, POLL_S)
        else:
            wake.arm(_watched(seen))
            await wake.wait(stop, POLL_S, clock)
        now = _listing(tree, wanted)
        changed = {folder for folder in seen.keys() | now.keys() if seen.get(folder) != now.get(folder)}
        seen = now
        if changed and not stop.is_set():
            yield changed


Listing = frozenset[tuple[str, int]]


def _entries(tree: Anchor, parts: tuple[str, ...]) -> Listing:
    """(name, inode) of each entry (a name replaced by another file counts as a change); nothing for
    a folder that is missing or a link (never listed through)."""
    try:
        with tree.folder(parts) as fd, os.scandir(fd) as entries:
            return frozenset((entry.name, entry.inode()) for entry in entries)
    except OSError:  # missing, or `UnsafeFolder`
        return frozenset()


def _listing(tree: Anchor, wanted: Callable[[str], bool]) -> dict[str, tuple[Listing, Listing]]:
    """Each served session folder's entries and its `requests/` entries (only served inboxes)."""
    names = (name for name, _ in _entries(tree, ("sessions",)) if wanted(name))
    return {f: (_entries(tree, ("sessions", f)), _entries(tree, ("sessions", f, "requests"))) for f in names}


def _watched(listing: dict[str, tuple[Listing, Listing]]) -> list[tuple[str, ...]]:
    """The folders a wake watches for `listing`: `sessions/`, each served folder and its `requests/`."""
    folders: list[tuple[str, ...]] = [("sessions",)]
    for folder in listing:
        folders += [("sessions", folder), ("sessions", folder, "requests")]
    return folders
