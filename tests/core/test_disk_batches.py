"""A burst's files staged and placed in one loop each (`DiskWriter.stage_batch` / `place_batch`), with
the very outcome of staging and placing them one by one (`stage`, `place`); a writer whose per-file
calls are its own (a fault test's) still sees every file; a batch placed in two parts around its
`half-linked` fault point."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.disk.anonymous import Staged
from core.disk.writer import DiskWriter
from tests.core.support import ALLOW_LS, assert_answered_once, responses, serve_until_answered, write_burst
from tests.helpers import needs_anonymous_files
from tests.history.support import Node


def _outcome(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def _one_by_one(fd: int, writer: DiskWriter, bodies: list[bytes], targets: list[str]) -> list[bool]:
    placed = []
    for index, (body, target) in enumerate(zip(bodies, targets, strict=True)):
        staged = writer.stage(fd, f"{index}.tmp", body, sync=False)
        placed.append(writer.place(fd, staged, target))
        if not placed[-1]:
            writer.discard(fd, staged)
    return placed


def _batched(fd: int, writer: DiskWriter, bodies: list[bytes], targets: list[str]) -> list[bool]:
    made = writer.stage_batch(fd, bodies)
    staged = [one if one is not None else writer.stage(fd, f"{index}.tmp", body, sync=False)
              for index, (one, body) in enumerate(zip(made, bodies, strict=True))]
    placed = writer.place_batch(fd, staged, targets)
    for one, done in zip(staged, placed, strict=True):
        assert not isinstance(done, Exception)
        if not done:
            writer.discard(fd, one)
    return [done is True for done in placed]


class ThroughProc(DiskWriter):
    """Anonymous files linked through `/proc/self/fd/N`, as where the kernel refuses a link by the
    descriptor (before Linux 6.10, without `CAP_DAC_READ_SEARCH`)."""

    by_descriptor = False


@needs_anonymous_files
@settings(max_examples=40, deadline=None)
@given(
    targets=st.lists(st.sampled_from([f"r{n}.json" for n in range(6)]), min_size=1, max_size=12),
    existing=st.sets(st.sampled_from([f"r{n}.json" for n in range(6)])),
    held=st.integers(min_value=0, max_value=14),
    kind=st.sampled_from([DiskWriter, ThroughProc]),
)
def test_a_batch_staged_and_placed_at_once_ends_as_one_by_one(
    targets: list[str], existing: set[str], held: int, kind: type[DiskWriter]
) -> None:
    """Whatever the names (repeated ones: the first placed wins, never replaced), the responses already
    there and the bound on anonymous files held (beyond it: named temps), both ways leave the same files
    with the same bytes, say the same of each, and hold no descriptor after."""

    bodies = [f"body {index} of {target}".encode() for index, target in enumerate(targets)]
    outcomes = []
    for way in (_one_by_one, _batched):
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            for target in existing:
                (folder / target).write_bytes(b"already there")
            writer = kind()
            writer.anonymous_max = held
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                placed = way(fd, writer, bodies, targets)
            finally:
                os.close(fd)
            assert writer._held == 0, "every anonymous file let go"
            outcomes.append((placed, _outcome(folder)))
    assert outcomes[0] == outcomes[1]


class CountingDisk(DiskWriter):
    """A writer whose per-file calls are its own: the batch calls must go through them."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def stage(self, dir_fd: int, name: str, data: bytes, sync: bool) -> Staged:
        self.calls.append(f"stage {name}")
        return super().stage(dir_fd, name, data, sync)

    def place(self, dir_fd: int, staged: Staged, target: str) -> bool:
        self.calls.append(f"place {target}")
        if target == "broken.json":
            raise OSError(5, "Input/output error")
        return super().place(dir_fd, staged, target)


def test_a_writer_with_its_own_per_file_calls_sees_every_file_of_a_batch(tmp_path: Path) -> None:
    writer = CountingDisk()
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert writer.stage_batch(fd, [b"a", b"b"]) == [None, None], "its own `stage` stages each"
        staged = [writer.stage(fd, "a.tmp", b"a", sync=False), writer.stage(fd, "b.tmp", b"b", sync=False)]
        placed = writer.place_batch(fd, staged, ["a.json", "broken.json"])
        assert placed[0] is True and isinstance(placed[1], OSError), "a failure is said, not raised"
        writer.discard(fd, staged[1])
    finally:
        os.close(fd)
    assert writer.calls == ["stage a.tmp", "stage b.tmp", "place a.json", "place broken.json"]
    assert _outcome(tmp_path) == {"a.json": b"a"}


async def test_half_of_each_batch_is_visible_at_its_half_linked_point(tmp_path: Path) -> None:
    """Crash tests kill at `half-linked` to find a batch partly placed: it falls after half of the
    batch's responses are linked, and before the rest, however the batch is split to be placed."""
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 600)
    seen: dict[str, list[int]] = {"durable": [], "half-linked": [], "linked": []}

    class Counted(list[str]):
        """The stages, each with the responses visible then (the fault hook, on the disk thread)."""

        def append(self, stage: str) -> None:
            if stage in seen:
                seen[stage].append(len(responses(node.root)))

    await serve_until_answered(node, ids, Counted())
    assert_answered_once(node, ids)
    assert seen["half-linked"], "a burst of 600 has batches of more than one"
    batches = list(zip(seen["durable"], seen["linked"], strict=True))
    halves = iter(seen["half-linked"])
    for before, after in batches:
        if after - before >= 2:  # a batch of one has no half
            assert next(halves) - before == (after - before) // 2
