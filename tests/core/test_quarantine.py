"""The quarantine is bounded by age and count, and pruned by descriptor (never through a link)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.disk.paths import encode_session_id
from core.forwarding.inbox import SessionInbox
from core.seams import Seams
from core.serving.quarantine import (
    HOLD_CHECKPOINTS,
    PRUNE_EVERY,
    QUARANTINE_MAX_AGE_S,
    QUARANTINE_MAX_ENTRIES,
    Quarantine,
)
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import session_dir, wait_for, write_request_bytes
from tests.history.support import Node, S

DAY = 24 * 3600.0


def hold(quarantine: Quarantine, root: Path, name: str) -> None:
    write_request_bytes(root, S, name, b"{}")
    quarantine.hold(SessionInbox(root, S), name, "unusable", answered=False)


def kept(state: Path) -> list[str]:
    """The original names: entries are `<stamp>-<ns>-<pid>.<serial>-<name>`."""
    folder = state / "quarantine" / encode_session_id(S)
    return sorted(n.split("-", 3)[3] for n in os.listdir(folder) if not n.endswith(".reason.json"))


def test_defaults_are_documented_values() -> None:
    assert QUARANTINE_MAX_AGE_S == 30 * DAY and QUARANTINE_MAX_ENTRIES == 1_000 and PRUNE_EVERY == 100


def test_entries_older_than_the_age_limit_are_pruned(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    quarantine = Quarantine(tmp_path / "state", seams=Seams(clock=clock), max_age_s=7 * DAY)
    hold(quarantine, tmp_path / "root", "old.json")
    clock.advance(5 * DAY)
    hold(quarantine, tmp_path / "root", "recent.json")
    clock.advance(3 * DAY)
    assert quarantine.prune() == 1
    assert kept(tmp_path / "state") == ["recent.json"]
    assert [r["quarantinedAt"] for r in quarantine.records()] == [int((clock.wall() - 3 * DAY) * 1000)]


def test_beyond_the_count_limit_the_oldest_go_first(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    quarantine = Quarantine(tmp_path / "state", seams=Seams(clock=clock), max_entries=3)
    for index in range(5):
        clock.advance(1)
        hold(quarantine, tmp_path / "root", f"r{index}.json")
    assert quarantine.prune() == 2
    assert kept(tmp_path / "state") == ["r2.json", "r3.json", "r4.json"]
    assert len(quarantine.records()) == 3


def test_holding_prunes_first_and_then_every_hundred_holds(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    quarantine = Quarantine(tmp_path / "state", seams=Seams(clock=clock), max_entries=2)
    for index in range(PRUNE_EVERY):
        hold(quarantine, tmp_path / "root", f"r{index:03d}.json")
    assert len(kept(tmp_path / "state")) == PRUNE_EVERY  # at most max_entries + PRUNE_EVERY
    hold(quarantine, tmp_path / "root", "last.json")  # prunes to 2 before holding the 101st
    assert len(kept(tmp_path / "state")) == 3


def test_entries_with_one_timestamp_never_replace_each_other(tmp_path: Path) -> None:
    quarantine = Quarantine(tmp_path / "state", seams=Seams(clock=ManualClock(1_800_000_000.0)))
    for content in (b"first", b"second"):
        write_request_bytes(tmp_path / "root", S, "same.json", content)
        quarantine.hold(SessionInbox(tmp_path / "root", S), "same.json", "unusable", answered=False)
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    held = sorted((folder / n).read_bytes() for n in os.listdir(folder) if not n.endswith(".reason.json"))
    assert held == [b"first", b"second"]


def test_pruning_removes_linked_and_folder_entries_without_following_them(tmp_path: Path) -> None:
    clock = ManualClock(1_800_000_000.0)
    quarantine = Quarantine(tmp_path / "state", seams=Seams(clock=clock), max_age_s=DAY)
    victim = tmp_path / "victim"
    (victim / "inner").mkdir(parents=True)
    (victim / "inner" / "keep.txt").write_text("keep")
    inbox = SessionInbox(tmp_path / "root", S)
    write_request_bytes(tmp_path / "root", S, "placeholder.json", b"{}")
    (inbox.requests_dir / "link.json").symlink_to(victim)
    (inbox.requests_dir / "dir.json").mkdir()
    (inbox.requests_dir / "dir.json" / "inner").symlink_to(victim / "inner")
    for name in ("link.json", "dir.json"):
        quarantine.hold(inbox, name, "unusable", answered=False)
    clock.advance(2 * DAY)
    assert quarantine.prune() == 2
    assert (victim / "inner" / "keep.txt").read_text() == "keep"
    assert os.listdir(tmp_path / "state" / "quarantine" / encode_session_id(S)) == []


def test_a_linked_quarantine_folder_is_neither_read_nor_pruned(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    old = "20000101T000000Z-000000000-x.json"
    (victim / old).write_text("keep")
    (victim / f"{old}.reason.json").write_text("{}")
    (tmp_path / "state" / "quarantine").mkdir(parents=True)
    (tmp_path / "state" / "quarantine" / encode_session_id(S)).symlink_to(victim)
    later = Seams(clock=ManualClock(1_800_000_000.0))
    quarantine = Quarantine(tmp_path / "state", seams=later, max_age_s=DAY)
    assert quarantine.prune() == 0
    assert quarantine.records() == []
    assert sorted(os.listdir(victim)) == [old, f"{old}.reason.json"]


def test_across_filesystems_files_and_links_are_copied_and_folders_left_in_place(tmp_path: Path) -> None:
    import shutil
    import tempfile

    import pytest

    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs a second filesystem (/dev/shm) for the state dir")
    state = Path(tempfile.mkdtemp(dir=shm))
    try:
        quarantine = Quarantine(state, seams=Seams(clock=ManualClock(1_800_000_000.0)))
        inbox = SessionInbox(tmp_path / "root", S)
        write_request_bytes(tmp_path / "root", S, "file.json", b"bytes")
        (inbox.requests_dir / "link.json").symlink_to(tmp_path / "victim")
        (inbox.requests_dir / "dir.json").mkdir()
        moved = quarantine.hold(inbox, "file.json", "unusable", answered=False).moved_to
        assert moved is not None and moved.read_bytes() == b"bytes"
        linked = quarantine.hold(inbox, "link.json", "unusable", answered=False).moved_to
        assert linked is not None and os.readlink(linked) == str(tmp_path / "victim")
        assert quarantine.hold(inbox, "dir.json", "unusable", answered=False).moved_to is None
        assert sorted(os.listdir(inbox.requests_dir)) == ["dir.json"]
        left = {str(r["originalPath"]).rsplit("/", 1)[1]: r.get("leftInPlace") for r in quarantine.records()}
        assert left["file.json"] is None and left["link.json"] is None
        assert "refused in place" in str(left["dir.json"])  # a folder is never moved (issue 34)
    finally:
        shutil.rmtree(state)


# --------------------------------------------------------------------------------------------------
# A process killed at each point of holding a file leaves nothing moved or the file with its reason.
#
# The kill comes through the quarantine's explicit `fault` seam (`tests/core/quarantine_child.py` exits
# with `os._exit(137)` at a checkpoint of `HOLD_CHECKPOINTS`); a later prune, or a serving core
# starting on the same state dir, completes or removes what the dead process left.


REPO = Path(__file__).resolve().parents[2]
NAME = "bad.json"
DATA = b"not json at all"


def killed_holding(tmp_path: Path, stage: str) -> None:
    """A real process holds `requests/bad.json` and dies at `stage`."""
    write_request_bytes(tmp_path / "root", S, NAME, DATA)
    command = [sys.executable, "-m", "tests.core.quarantine_child",
               str(tmp_path / "root"), str(tmp_path / "state"), S, NAME, stage]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, timeout=60, check=False)
    assert done.returncode == 137, done.stderr.decode()


def held(tmp_path: Path) -> list[str]:
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def in_inbox(tmp_path: Path) -> bool:
    return (session_dir(tmp_path / "root", S) / "requests" / NAME).exists()


def assert_whole(tmp_path: Path) -> None:
    """Either nothing moved (the file in the inbox, nothing held) or the file held with its reason."""
    names = held(tmp_path)
    if in_inbox(tmp_path):
        assert names == []
        return
    assert len(names) == 2 and names[1] == names[0] + ".reason.json", names
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    assert (folder / names[0]).read_bytes() == DATA
    assert json.loads((folder / names[1]).read_bytes())["reason"].startswith("unusable")


# What the kill leaves, before anything cleans up: the reason is always on disk first.
# (the file still in the inbox, the endings of what is held)
AFTER_KILL: dict[str, tuple[bool, tuple[str, ...]]] = {
    "reasoned": (True, (".pending.json",)),
    "moved": (False, ("", ".pending.json")),
}


@pytest.mark.parametrize("stage", HOLD_CHECKPOINTS)
def test_a_kill_at_each_stage_leaves_nothing_or_the_file_with_its_reason_after_a_prune(
    tmp_path: Path, stage: str
) -> None:
    killed_holding(tmp_path, stage)
    names = held(tmp_path)
    stem = names[0].removesuffix(".pending.json")
    still_in_inbox, ends = AFTER_KILL[stage]
    assert in_inbox(tmp_path) == still_in_inbox
    assert names == sorted(stem + end for end in ends)
    quarantine = Quarantine(tmp_path / "state")
    assert quarantine.prune() == 0
    assert_whole(tmp_path)
    assert len(quarantine.records()) == (0 if stage == "reasoned" else 1)


@pytest.mark.parametrize("stage", HOLD_CHECKPOINTS)
async def test_a_serving_core_started_after_the_kill_holds_the_file_once_with_its_reason(
    tmp_path: Path, stage: str
) -> None:
    killed_holding(tmp_path, stage)
    node = Node(tmp_path)
    await node.start(DenyingArbiter())
    try:
        await wait_for(lambda: not in_inbox(tmp_path) and not any(n.endswith(".pending.json")
                                                                     for n in held(tmp_path)))
        assert_whole(tmp_path)
    finally:
        await node.stop()


def test_a_live_holder_s_pending_reason_is_left_alone_until_it_is_too_old(tmp_path: Path) -> None:
    """Another process may be holding right now: only a dead process's leftovers are touched, or
    one older than the age limit (its pid now another process's)."""
    killed_holding(tmp_path, "reasoned")
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    (pending,) = os.listdir(folder)
    stamp, ns, unique, rest = pending.split("-", 3)
    live = f"{stamp}-{ns}-{os.getppid()}.{unique.split('.')[1]}-{rest}"
    os.rename(folder / pending, folder / live)
    assert Quarantine(tmp_path / "state").prune() == 0
    assert os.listdir(folder) == [live]
    later = ManualClock(time.time() + QUARANTINE_MAX_AGE_S + 60)
    assert Quarantine(tmp_path / "state", seams=Seams(clock=later)).prune() == 0
    assert os.listdir(folder) == []


def test_a_copy_cut_short_across_filesystems_is_removed_with_its_pending_reason(tmp_path: Path) -> None:
    """Across filesystems the file is copied under `core.disk.entries.temp_name` first: a kill mid-copy
    leaves that temp beside the pending reason (made here by hand: the copy has no fault point)."""
    killed_holding(tmp_path, "reasoned")
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    (pending,) = os.listdir(folder)
    stem = pending.removesuffix(".pending.json")
    dead_pid = stem.split("-")[2].split(".")[0]
    (folder / f"{stem}.{dead_pid}.1800000000000.tmp").write_bytes(DATA[:3])
    assert Quarantine(tmp_path / "state").prune() == 0
    assert os.listdir(folder) == []
    assert in_inbox(tmp_path)
