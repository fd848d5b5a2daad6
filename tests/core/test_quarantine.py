"""The quarantine is bounded by age and count, and pruned by descriptor (never through a link)."""

from __future__ import annotations

import os
from pathlib import Path

from core.disk.paths import encode_session_id
from core.forwarding.inbox import SessionInbox
from core.seams import Seams
from core.serving.quarantine import PRUNE_EVERY, QUARANTINE_MAX_AGE_S, QUARANTINE_MAX_ENTRIES, Quarantine
from core.testing import ManualClock
from tests.helpers import write_request_bytes

S = "S"
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
        assert "not copied" in str(left["dir.json"])
    finally:
        shutil.rmtree(state)
