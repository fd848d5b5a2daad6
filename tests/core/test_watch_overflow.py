"""The kernel's event queue overflowing while the watcher gathers a burst (or the consumer rescans)
still leads to a full rescan (campaign4, issue 37's fifth pass: the watcher now waits up to
`GATHER_MAX_S` between reads and reads again when a read came back full, so the overflow marker may
sit behind more than one read's worth of events). Real inotify: more files are created than the
queue holds (`/proc/sys/fs/inotify/max_queued_events`) before anything is read."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from core.disk.tree import Anchor
from core.forwarding.inotify import READ_SIZE
from core.forwarding.watch import _SessionTree
from tests.helpers import needs_inotify

QUEUE_LIMIT = Path("/proc/sys/fs/inotify/max_queued_events")


def _queue_limit() -> int:
    try:
        return int(QUEUE_LIMIT.read_text())
    except (OSError, ValueError):
        return 0


@needs_inotify
@pytest.mark.skipif(not 0 < _queue_limit() <= 65536, reason="the inotify queue's limit unknown or too large")
def test_an_overflow_behind_a_full_read_still_rescans_everything(tmp_path: Path) -> None:
    requests = tmp_path / "sessions" / "s1" / "requests"
    requests.mkdir(parents=True)

    def settled(folder: str, names: Sequence[str]) -> bool:
        return False  # no answered request's: each removal is news

    tree = _SessionTree(tmp_path / "sessions", Anchor(tmp_path, "forwarding root"), settled)
    try:
        tree.start()
        tree.on_readable()
        tree.take()
        assert not tree.rescan_all
        fd = os.open(requests, os.O_RDONLY | os.O_DIRECTORY)
        try:  # more events than the queue holds, none read meanwhile (a long gather, a long rescan)
            for i in range(_queue_limit() + 64):
                os.close(os.open(f"{i:036d}.json", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        finally:
            os.close(fd)
        sizes = [tree.on_readable()]
        while sizes[-1]:  # the loop's later turns (a call reads at most `READS_AT_ONCE` full reads)
            sizes.append(tree.on_readable())
        assert sum(sizes) > READ_SIZE  # the overflow marker came after more than one read's worth
        assert tree.rescan_all, "an overflow that does not lead to a full rescan loses what it dropped"
        assert tree.ready.is_set()
        assert tree.take() == set()  # RESCAN_ALL
        assert not tree.rescan_all
    finally:
        tree.close()
