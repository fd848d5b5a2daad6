"""`core.disk.tree`: folders opened component by component by descriptor, never through a link."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from core.disk.entries import replace_file
from core.disk.tree import Anchor, UnsafeFolder, open_dir
from core.disk.writer import DiskWriter, publish_once
from core.platform import anonymous_files
from core.testing import NamedTemps
from tests.helpers import needs_anonymous_files


def test_missing_folders_are_created_owner_only_component_by_component(tmp_path: Path) -> None:
    anchor = Anchor(tmp_path / "root", "forwarding root")
    with anchor.folder(("sessions", "S", "responses"), create=True) as fd:
        assert publish_once(fd, "r.json", b"{}") is True
    for folder in ("root/sessions", "root/sessions/S", "root/sessions/S/responses"):
        assert stat.S_IMODE((tmp_path / folder).stat().st_mode) == 0o700
    assert (tmp_path / "root/sessions/S/responses/r.json").read_bytes() == b"{}"


def test_missing_folders_are_not_created_when_only_reading(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    with pytest.raises(FileNotFoundError):
        Anchor(tmp_path / "root", "forwarding root").open(("sessions", "S"))
    assert os.listdir(tmp_path / "root") == []
    with pytest.raises(FileNotFoundError):
        Anchor(tmp_path / "absent", "forwarding root").open(("sessions",))
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize("level", [0, 1, 2])
@pytest.mark.parametrize("create", [False, True])
def test_a_link_at_any_level_is_refused_and_named(tmp_path: Path, level: int, create: bool) -> None:
    parts = ("sessions", "S", "responses")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "S" / "responses").mkdir(parents=True)
    root = tmp_path / "root"
    real = root.joinpath(*parts[:level])
    real.mkdir(parents=True, exist_ok=True)
    (real / parts[level]).symlink_to(elsewhere)
    with pytest.raises(UnsafeFolder, match="is a symbolic link") as caught:
        Anchor(root, "forwarding root").open(parts, create=create)
    assert caught.value.where == str(root.joinpath(*parts[: level + 1]))
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["S", "responses"]


def test_a_file_where_a_folder_belongs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "root" / "sessions").mkdir(parents=True)
    (tmp_path / "root" / "sessions" / "S").write_text("not a folder")
    with pytest.raises(UnsafeFolder, match="is not a folder"):
        Anchor(tmp_path / "root", "forwarding root").open(("sessions", "S", "requests"), create=True)


def test_names_cannot_choose_a_path(tmp_path: Path) -> None:
    anchor = Anchor(tmp_path, "forwarding root")
    for bad in ("..", ".", "", "a/b", "a\x00b"):
        with pytest.raises(ValueError):
            anchor.open(("sessions", bad), create=True)
    assert os.listdir(tmp_path) == ["sessions"]


def test_open_dir_walks_below_any_descriptor(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "l").symlink_to(tmp_path / "a" / "b")
    base = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.close(open_dir(base, ("a", "b")))
        with pytest.raises(UnsafeFolder):
            open_dir(base, ("a", "l"))
    finally:
        os.close(base)


def test_a_root_reached_through_a_link_is_resolved_once_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The person may configure a root through a link (`/home -> /data/home`); the link is followed once."""
    (tmp_path / "data" / "home").mkdir(parents=True)
    (tmp_path / "home").symlink_to(tmp_path / "data" / "home")
    anchor = Anchor(tmp_path / "home" / "root", "forwarding root")
    with caplog.at_level(logging.INFO, logger="pi_authorizer.tree"), anchor.folder(("serving",), True) as fd:
        replace_file(fd, "S.json", b"1")
    assert anchor.real == str(tmp_path / "data" / "home" / "root")
    assert "resolves to" in caplog.text and str(tmp_path / "data" / "home" / "root") in caplog.text
    # Re-pointing the link later does not move the tree: the resolved folder stays the anchor.
    (tmp_path / "other").mkdir()
    (tmp_path / "home").unlink()
    (tmp_path / "home").symlink_to(tmp_path / "other")
    with anchor.folder(("serving",), create=True) as fd:
        replace_file(fd, "S.json", b"2")
    assert (tmp_path / "data" / "home" / "root" / "serving" / "S.json").read_bytes() == b"2"
    assert os.listdir(tmp_path / "other") == []


def test_a_removed_anchor_is_recreated_along_its_real_path(tmp_path: Path) -> None:
    anchor = Anchor(tmp_path / "state", "state dir")
    with anchor.folder(("locks",), create=True):
        pass
    os.rmdir(tmp_path / "state" / "locks")
    os.rmdir(tmp_path / "state")
    with anchor.folder(("locks",), create=True):
        pass
    assert (tmp_path / "state" / "locks").is_dir()


def test_a_link_appearing_on_the_resolved_path_later_is_refused(tmp_path: Path) -> None:
    anchor = Anchor(tmp_path / "a" / "root", "forwarding root")
    with anchor.folder(create=True):
        pass
    os.rmdir(tmp_path / "a" / "root")
    os.rmdir(tmp_path / "a")
    (tmp_path / "b" / "root").mkdir(parents=True)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    with pytest.raises(UnsafeFolder, match="is a symbolic link"):
        anchor.open(("sessions",), create=True)
    assert os.listdir(tmp_path / "b" / "root") == []



class NoRenameat2(NamedTemps):
    """A filesystem that refuses `renameat2(RENAME_NOREPLACE)`: `place` falls back to `link()`."""

    def rename_noreplace(self, dir_fd: int, source: str, target: str) -> bool | None:
        return None


class ThroughProc(DiskWriter):
    """Anonymous files linked through `/proc/self/fd/N` (a kernel refusing a link by the descriptor)."""

    by_descriptor = False


@pytest.mark.parametrize(
    "writer", [DiskWriter(), ThroughProc(), NamedTemps(), NoRenameat2()],
    ids=["anonymous", "anonymous-proc", "renameat2", "link"],
)
def test_place_never_replaces_and_leaves_no_temp_once_placed(tmp_path: Path, writer: DiskWriter) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    anonymous = writer.anonymous and anonymous_files()  # a named temp where the system has none
    try:
        first = writer.stage(fd, "a.tmp", b"first", sync=True)
        assert (first.fd is not None) == anonymous
        assert writer.place(fd, first, "a.json") is True
        assert sorted(os.listdir(tmp_path)) == ["a.json"]
        second = writer.stage(fd, "b.tmp", b"second", sync=False)
        writer.sync_file(fd, second)
        assert writer.place(fd, second, "a.json") is False
        assert (tmp_path / "a.json").read_bytes() == b"first"
        # What was refused is still staged, for the caller to drop: a named temp beside the target,
        # an anonymous file held open and never visible.
        staged_names = [] if anonymous else ["b.tmp"]
        assert sorted(os.listdir(tmp_path)) == ["a.json", *staged_names]
        writer.discard(fd, second)
        assert sorted(os.listdir(tmp_path)) == ["a.json"]
    finally:
        os.close(fd)


@needs_anonymous_files
def test_an_anonymous_file_is_invisible_until_placed_and_the_held_ones_are_bounded(tmp_path: Path) -> None:
    """Beyond `anonymous_max` files held open, responses are staged as named temps (descriptors are
    bounded); a discarded anonymous file frees its place and leaves nothing behind."""
    writer = DiskWriter()
    writer.anonymous_max = 1
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        held = writer.stage(fd, "a.tmp", b"a", sync=False)
        named = writer.stage(fd, "b.tmp", b"b", sync=False)
        assert held.fd is not None and named.fd is None
        assert os.listdir(tmp_path) == ["b.tmp"]
        writer.discard(fd, held)
        again = writer.stage(fd, "c.tmp", b"c", sync=True)
        assert again.fd is not None and os.listdir(tmp_path) == ["b.tmp"]
        assert writer.place(fd, again, "c.json") is True and writer.place(fd, named, "b.json") is True
        assert sorted(os.listdir(tmp_path)) == ["b.json", "c.json"]
        assert [(tmp_path / n).read_bytes() for n in ("b.json", "c.json")] == [b"b", b"c"]
    finally:
        os.close(fd)
