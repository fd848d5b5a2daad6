"""A `responses/` watch vouches for nothing through a watch that may be gone (review of issue 37's
sixth pass, finding 1). An overflow drops every event the kernel could not queue, the watch's
`IN_IGNORED` among them: a folder removed then, and another made in its place on an inode of the same
number (ext4 hands a freed inode to the next `mkdir`), was taken for the watched one, its listing kept
up by a watch that no longer existed. Before a folder is listed, its watch is added again (the live
one, or a new one). Real inotify, real folders."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from core import platform
from core.forwarding.outbox import Outboxes
from tests.core.support import looked
from tests.helpers import needs_inotify

QUEUE_LIMIT = Path("/proc/sys/fs/inotify/max_queued_events")


def made_again_on(folder: Path, inode: int) -> bool:
    """`folder` made again until it has `inode` (the ones made otherwise are moved aside)."""
    for attempt in range(64):
        folder.mkdir()
        if folder.stat().st_ino == inode:
            return True
        folder.rename(folder.with_name(f"aside-{attempt}"))
    return False


@needs_inotify
@pytest.mark.skipif(not QUEUE_LIMIT.exists() or int(QUEUE_LIMIT.read_text()) > 65536,
                    reason="the inotify queue's limit unknown or too large")
def test_a_folder_made_again_on_the_inode_of_one_removed_during_an_overflow_is_not_vouched_for(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "responses"
    folder.mkdir()
    overflows: list[None] = []
    boxes = Outboxes(lambda folder, pid, target: None, lambda: overflows.append(None))
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert boxes.watch("s1", fd, platform.proc_fd_path(fd))
        inode = os.fstat(fd).st_ino
    finally:
        os.close(fd)
    try:
        assert looked(boxes, folder, ["r.json"]) == frozenset()
        # More events than the queue holds (two names in turn: the kernel merges only a repeat of the
        # last event), the folder left empty: the queue is full and its overflow noted.
        for i in range(int(QUEUE_LIMIT.read_text()) + 64):
            name = folder / ("a.tmp" if i % 2 else "b.tmp")
            name.touch()
            name.unlink()
        folder.rmdir()  # its IN_IGNORED finds the queue full: dropped
        if not made_again_on(folder, inode):
            pytest.skip("this filesystem did not hand the freed inode to a new folder")
        assert looked(boxes, folder, ["r.json"]) in (None, frozenset())  # listed again: exact so far
        assert overflows
        (folder / "r.json").write_text("someone else's response, in the folder made again")
        assert looked(boxes, folder, ["r.json"]) in (None, frozenset({"r.json"}))
    finally:
        boxes.close()


@needs_inotify
def test_a_watch_refused_when_a_folder_is_listed_vouches_for_nothing_and_raises_nothing(
    tmp_path: Path,
) -> None:
    """The watch added again before a listing may be refused (the user's watches used up): the look
    then vouches for nothing (the caller lists or looks its own way); the trip asking never fails."""
    folder = tmp_path / "responses"
    folder.mkdir()
    refusing: list[bool] = [False]

    def fault(checkpoint: str) -> None:
        if checkpoint == platform.ADD_WATCH_CHECKPOINT and refusing[0]:
            raise OSError(errno.ENOSPC, "no space left on device")

    boxes = Outboxes(lambda folder, pid, target: None, lambda: None, fault)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert boxes.watch("s1", fd, platform.proc_fd_path(fd))
    finally:
        os.close(fd)
    try:
        refusing[0] = True
        (folder / "r.json").write_text("an answer")
        assert looked(boxes, folder, ["r.json"]) is None
        refusing[0] = False
        assert looked(boxes, folder, ["r.json"]) == frozenset({"r.json"})
    finally:
        boxes.close()
