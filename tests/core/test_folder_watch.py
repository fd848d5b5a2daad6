"""`FolderWatch` (config reloads) on real inotify: a change wakes the waiter long before its re-check."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from core.forwarding.inotify import FolderWatch

RECHECK_S = 600.0  # far beyond the test's hang guard: only a change can end the wait in time


def touch(path: Path) -> None:
    path.write_text("{}")


async def woken_by(watch: FolderWatch, change: Path) -> None:
    stop = asyncio.Event()
    waiting = asyncio.create_task(watch.wait(stop, RECHECK_S))
    await asyncio.sleep(0)  # the waiter is waiting before the change is made
    touch(change)
    await asyncio.wait_for(waiting, 30)


async def test_a_change_in_a_watched_folder_wakes_the_waiter(tmp_path: Path) -> None:
    watch = FolderWatch()
    try:
        watch.arm([str(tmp_path)])
        await woken_by(watch, tmp_path / "config.json")
    finally:
        watch.close()


async def test_a_folder_removed_and_made_again_is_watched_again_once_re_armed(tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    watch = FolderWatch()
    try:
        watch.arm([str(folder)])
        touch(folder / "old.json")
        shutil.rmtree(folder)
        await asyncio.wait_for(watch.wait(asyncio.Event(), RECHECK_S), 30)  # woken by the removal
        folder.mkdir()
        watch.arm([str(folder)])  # the same path: armed afresh, since its watch was dropped
        await woken_by(watch, folder / "config.json")
    finally:
        watch.close()


async def test_stop_ends_the_wait(tmp_path: Path) -> None:
    watch = FolderWatch()
    try:
        watch.arm([str(tmp_path)])
        stop = asyncio.Event()
        stop.set()
        await asyncio.wait_for(watch.wait(stop, RECHECK_S), 30)
    finally:
        watch.close()
