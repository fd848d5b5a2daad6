"""Another server's temp file in `responses/` is told while a child keeps a flood of its own temp files
going in `requests/` (review of issue 37's sixth pass, finding 2). The loop leaves `responses/`'s
inotify instance unread during a burst's stream (reads of the tree over `BULK_BYTES`), since the
burst's trips read it; a child's temps are no news (no rescan, no trip), so the loop reads it itself
once no trip has for `OUTBOX_SKIPS` reads. Real inotify."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from core.disk.tree import Anchor
from core.forwarding.watch import BULK_BYTES, _SessionTree
from tests.helpers import needs_inotify

#: A child's temp names: 64 bytes of event each, a read of `TEMPS` of them over `BULK_BYTES`.
STEM = "c" * 40
TEMPS = BULK_BYTES // 48 + 8
TURNS = 40


def answered_nothing(folder: str, names: Sequence[str]) -> bool:
    return False


@needs_inotify
def test_another_servers_temp_is_told_while_a_child_floods_its_requests_with_temps(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "s1"
    (folder / "requests").mkdir(parents=True)
    (folder / "responses").mkdir()
    told: list[tuple[str, int, str]] = []
    tree = _SessionTree(tmp_path / "sessions", Anchor(tmp_path, "forwarding root"), answered_nothing,
                        foreign=lambda name, pid, target: told.append((name, pid, target)))
    try:
        tree.start()
        tree.on_readable()
        tree.take()  # the start's full rescan
        other = os.getpid() + 1
        (folder / "responses" / f"r1.json.{other}.1700000000000.tmp").write_bytes(b"{")
        for turn in range(TURNS):  # the child's flood: each turn's events a bulk read
            for i in range(TEMPS):
                temp = folder / "requests" / f"{STEM}{turn:03d}{i:04d}.tmp"
                os.close(os.open(temp, os.O_CREAT | os.O_WRONLY, 0o600))
                os.unlink(temp)
            tree.on_readable()
        assert told == [("s1", other, "r1.json")]
    finally:
        tree.close()
