"""The forwarding root's watcher where inotify is missing (`core.forwarding.watch` falls back): list each
folder every `POLL_S` and report the session folders whose entries changed; on macOS a kqueue wake
(`core.forwarding.kqueue`) lists them as soon as one changes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterable

from core.clock import SYSTEM_CLOCK, Clock
from core.disk.entries import temp_target, temp_writer
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
    foreign: Callable[[str, int, str], None] = lambda folder, pid, target: None,
    wake: FolderWake | None = None,
) -> AsyncIterator[set[str]]:
    """Where inotify is missing (or its watches are used up): list `sessions/`, each served session
    folder and its `requests/` every `POLL_S` on `clock` (the reference's own poll interval), each by
    descriptor and without recursion, and yield the folders whose entries changed. The first yield is
    a full rescan. A served inbox's `responses/` is listed too: another process's temp name there
    (`foreign`, once per name) is another server writing answers (a temp lives for an instant, so
    polling sees fewer of them than inotify). A `wake` watching the listed folders ends each wait as
    soon as one of them changes."""
    seen = _listing(tree, wanted)
    temps: set[tuple[str, str]] = set()
    yield set(RESCAN_ALL)
    while not stop.is_set():
        if wake is None:
            await clock.wait(stop, POLL_S)
        else:
            wake.arm(_watched(seen))
            await wake.wait(stop, POLL_S, clock)
        temps = _foreign_temps(tree, seen, temps, foreign)
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


def _foreign_temps(
    tree: Anchor, served: Iterable[str], before: set[tuple[str, str]],
    foreign: Callable[[str, int, str], None],
) -> set[tuple[str, str]]:
    """Temp names of other processes in each served `responses/`; each new one is told `foreign`."""
    now: set[tuple[str, str]] = set()
    for folder in served:
        for name, _ in _entries(tree, ("sessions", folder, "responses")):
            pid, target = temp_writer(name), temp_target(name)
            if pid is None or target is None or pid == os.getpid():
                continue
            now.add((folder, name))
            if (folder, name) not in before:
                foreign(folder, pid, target)
    return now


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
