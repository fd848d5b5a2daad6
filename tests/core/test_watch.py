"""The watcher on real inotify events: folders that appear late, vanish and come back."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.forwarding.inotify import FolderWatch
from core.forwarding.watch import watch_session_folders
from tests.helpers import needs_inotify


class Collector:
    def __init__(self, root: Path, force_polling: bool) -> None:
        self.root = root
        self.stop = asyncio.Event()
        self.seen: list[set[str]] = []
        self.history: list[set[str]] = []
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._run(force_polling))

    async def _run(self, force_polling: bool) -> None:
        async for folders in watch_session_folders(self.root, self.stop, force_polling):
            self.seen.append(folders)
            self.history.append(folders)
            self.changed.set()

    async def started(self, within: float = 10.0) -> None:
        """The first yield (a full rescan) has arrived. The inotify watches are in place before it;
        the polling snapshot is taken when the generator resumes, before this task runs again."""

        async def until() -> None:
            while not self.seen:
                await self.changed.wait()

        await asyncio.wait_for(until(), within)

    async def expect(self, folder: str, within: float = 10.0) -> None:
        async def until() -> None:
            while not any(folder in s for s in self.seen):
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), within)
        self.seen.clear()


@pytest.fixture(params=[False, True], ids=["inotify", "polling"])
async def collector(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Collector]:
    c = Collector(tmp_path, force_polling=request.param)
    await c.started()
    yield c
    c.stop.set()
    await asyncio.wait_for(c.task, 5)


async def test_first_yield_asks_for_a_full_rescan(collector: Collector) -> None:
    assert collector.seen and collector.seen[0] == set()


async def test_folders_created_after_start_are_watched(tmp_path: Path, collector: Collector) -> None:
    requests = tmp_path / "sessions" / "late" / "requests"
    requests.mkdir(parents=True)
    await collector.expect("late")
    (requests / "r.json.tmp").write_text("{}")
    (requests / "r.json.tmp").rename(requests / "r.json")
    await collector.expect("late")
    (requests / "r.json").unlink()
    await collector.expect("late")


async def test_folder_removed_by_child_cleanup_and_recreated(tmp_path: Path, collector: Collector) -> None:
    session = tmp_path / "sessions" / "again"
    (session / "requests").mkdir(parents=True)
    await collector.expect("again")
    shutil.rmtree(session)
    await collector.expect("again")
    (session / "requests").mkdir(parents=True)
    (session / "requests" / "x.json").write_text("{}")
    await collector.expect("again")


async def test_changes_behind_a_linked_session_folder_are_not_watched(
    tmp_path: Path, collector: Collector
) -> None:
    """The poller never recurses through a link (a link to `/` would make it walk the whole disk)."""
    foreign = tmp_path / "foreign"
    (foreign / "requests").mkdir(parents=True)
    (tmp_path / "sessions").mkdir(exist_ok=True)
    (tmp_path / "sessions" / "linked").symlink_to(foreign)
    await collector.expect("linked")  # the link itself appearing is a change of `sessions/`
    (foreign / "requests" / "r.json").write_text("{}")
    requests = tmp_path / "sessions" / "sane" / "requests"
    requests.mkdir(parents=True)
    (requests / "r.json").write_text("{}")
    seen = len(collector.history)
    await collector.expect("sane")
    assert not any("linked" in s for s in collector.history[seen:])


# --------------------------------------------------------------------------------------------------
# `FolderWatch` (config reloads) on real inotify: a change wakes the waiter long before its re-check.


RECHECK_S = 600.0  # far beyond the test's hang guard: only a change can end the wait in time


def touch(path: Path) -> None:
    path.write_text("{}")


async def woken_by(watch: FolderWatch, change: Path) -> None:
    stop = asyncio.Event()
    waiting = asyncio.create_task(watch.wait(stop, RECHECK_S))
    await asyncio.sleep(0)  # the waiter is waiting before the change is made
    touch(change)
    await asyncio.wait_for(waiting, 30)


@needs_inotify
async def test_a_change_in_a_watched_folder_wakes_the_waiter(tmp_path: Path) -> None:
    watch = FolderWatch()
    try:
        watch.arm([str(tmp_path)])
        await woken_by(watch, tmp_path / "config.json")
    finally:
        watch.close()


@needs_inotify
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
