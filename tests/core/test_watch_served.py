"""inotify watches only for served inboxes (issue 21, finding 5): folders nobody serves (a child may
make ~96k) cost no watch; a session taken later gets its watches; asks still arrive by file event."""

from __future__ import annotations

import os
from pathlib import Path

from core.disk.paths import encode_session_id
from core.serving.asks import DenyingArbiter
from tests.helpers import Served, needs_inotify, read_response_when_written, wait_for, write_request
from tests.history.support import S

OTHER = "019ff969-c34c-70be-9034-fae19c852999"


def inotify_watches() -> int:
    """The inotify watches this process holds now (`/proc/self/fdinfo` of its inotify descriptors)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                count += sum(1 for line in info if line.startswith("inotify wd:"))
        except OSError:
            continue
    return count


@needs_inotify
async def test_only_served_inboxes_are_watched(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for n in range(60):  # empty session folders of sessions nobody serves
        (root / "sessions" / f"junk-{n}" / "requests").mkdir(parents=True)
    (root / "sessions" / encode_session_id(S) / "requests").mkdir(parents=True)
    before = inotify_watches()
    async with Served(tmp_path, DenyingArbiter()) as served:
        await wait_for(lambda: inotify_watches() - before >= 3, what="the watches of the served inbox")
        write_request(root, S, "a")  # arrives by file event
        await read_response_when_written(root, S, "a")
        assert inotify_watches() - before <= 4  # sessions/, the served folder, its requests/ and responses/
        (root / "sessions" / encode_session_id(OTHER) / "requests").mkdir(parents=True)
        served.core.add_session(OTHER)
        await wait_for(lambda: inotify_watches() - before >= 6, what="the later session watched")
        write_request(root, OTHER, "b")
        await read_response_when_written(root, OTHER, "b")
        assert inotify_watches() - before <= 7
