"""What a `responses/` watch vouches for (`core.forwarding.outbox`) is what a look of the folder itself
finds, whatever was created, linked, renamed in or out, removed or planted there meanwhile and however
the events were read; where it cannot vouch (an overflow, the folder replaced, a watch gone) it says
so, and the look lists the folder (`existing_responses`, the slow path) as before. Real inotify, real
folders."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import platform
from core.forwarding import outbox
from core.forwarding.outbox import Outboxes
from tests.core.support import looked, tell
from tests.helpers import needs_inotify

POOL = [f"r{i}.json" for i in range(6)]
QUEUE_LIMIT = Path("/proc/sys/fs/inotify/max_queued_events")


class Told:
    """What the outboxes handed the loop: another writer's temps, and overflows."""

    def __init__(self) -> None:
        self.foreign: list[tuple[str, int, str]] = []
        self.overflows = 0

    def on_foreign(self, folder: str, pid: int, target: str) -> None:
        self.foreign.append((folder, pid, target))

    def on_overflow(self) -> None:
        self.overflows += 1


@contextmanager
def watched(folder: Path, view_max: int = outbox.VIEW_MAX) -> Iterator[tuple[Outboxes, Told, int]]:
    told = Told()
    boxes = Outboxes(told.on_foreign, told.on_overflow, view_max=view_max)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert boxes.watch("s1", fd, platform.proc_fd_path(fd))
        yield boxes, told, fd
    finally:
        os.close(fd)
        boxes.close()


def slow(folder: Path, names: list[str]) -> frozenset[str]:
    """What a listing of the folder finds of `names` (the slow path's answer)."""
    return frozenset(set(os.listdir(folder)).intersection(names))


OPS = st.tuples(st.sampled_from(["create", "link", "rename_in", "rename_out", "remove", "mkdir", "symlink",
                                 "temp", "look_on_loop", "look"]),
                st.sampled_from(POOL))


@needs_inotify
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=30))
def test_a_watch_vouches_for_exactly_what_the_folder_holds(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str]],
) -> None:
    base = tmp_path_factory.mktemp("outbox")
    folder, aside = base / "responses", base / "aside"
    folder.mkdir()
    aside.mkdir()
    (folder / "r5.json").write_text("before the watch")
    with watched(folder) as (boxes, told, _):
        for at, (op, name) in enumerate(ops):
            target = folder / name
            if op == "create" and not os.path.lexists(target):
                target.write_text("theirs")
            elif op == "link" and not os.path.lexists(target):
                (aside / f"l{at}").write_text("x")
                os.link(aside / f"l{at}", target)
            elif op == "rename_in" and not target.is_dir():
                (aside / f"m{at}").write_text("x")
                os.rename(aside / f"m{at}", target)
            elif op == "rename_out" and os.path.lexists(target) and not target.is_dir():
                os.rename(target, aside / f"o{at}")
            elif op == "remove" and target.is_dir() and not target.is_symlink():
                target.rmdir()
            elif op == "remove" and os.path.lexists(target):
                target.unlink()
            elif op == "mkdir" and not os.path.lexists(target):
                target.mkdir()
            elif op == "symlink" and not os.path.lexists(target):
                target.symlink_to(aside / "nowhere")
            elif op == "temp":
                (folder / f"{name}.4242.{at}.tmp").write_text("another server's")
            elif op == "look_on_loop":
                boxes.read()
            else:
                assert looked(boxes, folder, POOL) == slow(folder, POOL)
        assert looked(boxes, folder, POOL) == slow(folder, POOL)
        if any(op == "temp" for op, _ in ops) and os.getpid() != 4242:
            assert told.foreign and all(pid == 4242 for _, pid, _ in told.foreign)


@needs_inotify
def test_a_response_planted_just_before_the_look_is_found(tmp_path: Path) -> None:
    """The events of a burst's own links are read, the view vouches; then someone plants one more
    name: the very next look finds it (its event is read before the look answers)."""
    folder = tmp_path / "responses"
    folder.mkdir()
    with watched(folder) as (boxes, _, _):
        assert looked(boxes, folder, POOL) == frozenset()
        for i in range(200):
            (folder / f"ours{i}.json").write_text("ours")
        boxes.read()
        (folder / "r1.json").write_text("planted")
        assert looked(boxes, folder, POOL) == frozenset({"r1.json"})


@needs_inotify
def test_a_folder_put_in_the_watched_ones_place_is_not_vouched_for(tmp_path: Path) -> None:
    """`responses/` renamed away and another folder (with a planted response) put in its place: the
    watch is on the old one, so the look says it cannot vouch, and the slow path lists the new one."""
    folder = tmp_path / "responses"
    folder.mkdir()
    with watched(folder) as (boxes, _, _):
        assert looked(boxes, folder, POOL) == frozenset()
        folder.rename(tmp_path / "old")
        folder.mkdir()
        (folder / "r2.json").write_text("planted")
        assert looked(boxes, folder, POOL) is None
        assert looked(boxes, tmp_path / "old", POOL) == frozenset()


@needs_inotify
def test_a_folder_removed_is_no_longer_vouched_for(tmp_path: Path) -> None:
    folder = tmp_path / "responses"
    folder.mkdir()
    with watched(folder) as (boxes, _, _):
        assert looked(boxes, folder, POOL) == frozenset()
        folder.rmdir()
        folder.mkdir()
        (folder / "r3.json").write_text("planted")
        assert looked(boxes, folder, POOL) is None


@needs_inotify
def test_a_view_grown_past_its_bound_is_listed_again(tmp_path: Path) -> None:
    folder = tmp_path / "responses"
    folder.mkdir()
    with watched(folder, view_max=8) as (boxes, _, _):
        assert looked(boxes, folder, POOL) == frozenset()
        for i in range(20):
            (folder / f"ours{i}.json").write_text("ours")
        (folder / "r4.json").write_text("planted")
        assert looked(boxes, folder, POOL) == frozenset({"r4.json"})
        for i in range(20, 40):
            (folder / f"ours{i}.json").write_text("ours")
        (folder / "r3.json").write_text("planted")
        assert looked(boxes, folder, POOL) == frozenset({"r3.json", "r4.json"})


@needs_inotify
@pytest.mark.skipif(not QUEUE_LIMIT.exists() or int(QUEUE_LIMIT.read_text()) > 65536,
                    reason="the inotify queue's limit unknown or too large")
def test_after_an_overflow_the_look_is_still_exact_and_the_loop_is_told(tmp_path: Path) -> None:
    folder = tmp_path / "responses"
    folder.mkdir()
    with watched(folder) as (boxes, told, fd):
        assert looked(boxes, folder, POOL) == frozenset()
        for i in range(int(QUEUE_LIMIT.read_text()) + 64):  # more events than the queue holds
            os.close(os.open(f"{i:020d}.json", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        (folder / "r0.json").write_text("planted after the overflow")
        assert looked(boxes, folder, POOL) == frozenset({"r0.json"})
        assert told.overflows >= 1
        (folder / "r1.json").write_text("planted after the listing")
        assert looked(boxes, folder, POOL) == frozenset({"r0.json", "r1.json"})


@needs_inotify
def test_a_look_in_this_process_asks_the_watch_registered_for_the_folder(tmp_path: Path) -> None:
    """`outbox.existing` (what `existing_responses` asks first) answers only for a folder a registered
    watch vouches for."""
    folder = tmp_path / "responses"
    folder.mkdir()
    (folder / "r0.json").write_text("there")
    with watched(folder) as (boxes, _, fd):
        assert outbox.existing(fd, POOL) is None
        outbox.register(boxes, tell)
        try:
            assert outbox.existing(fd, POOL) == frozenset({"r0.json"})
        finally:
            outbox.unregister(boxes)
        assert outbox.existing(fd, POOL) is None
