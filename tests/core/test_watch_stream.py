"""A burst's inotify events: read whole however many reads they take, and in growing stretches while
the burst lasts, never making asks one after the other wait longer than `GATHER_S`."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from core.disk.tree import Anchor
from core.forwarding.inotify import HEADER, READ_SIZE
from core.forwarding.watch import GATHER_MAX_S, GATHER_S, READS_AT_ONCE, _Reading, _SessionTree
from tests.helpers import needs_inotify


@needs_inotify
def test_a_burst_larger_than_one_read_is_read_whole_at_once(tmp_path: Path) -> None:
    """Removals beyond what one read takes are all seen by the one call (a burst gathered for 16 ms
    holds more than a read's worth): none waits for the next stretch."""
    requests = tmp_path / "sessions" / "s1" / "requests"
    requests.mkdir(parents=True)
    removed: list[str] = []

    def settled(folder: str, names: Sequence[str]) -> bool:
        removed.extend(names)
        return True

    tree = _SessionTree(tmp_path / "sessions", Anchor(tmp_path, "forwarding root"), settled)
    try:
        tree.start()
        assert tree.on_readable() == 0
        names = [f"{i:036d}.json" for i in range(2_000)]
        for name in names:
            (requests / name).write_bytes(b"{}")
        tree.on_readable()
        tree.take()
        for name in names:
            os.unlink(requests / name)
        size = tree.on_readable()
        assert size > READ_SIZE  # more than one read's worth, all taken by this call
        assert sorted(removed) == names
        assert tree.take() == set()  # every removal was an answered request's: no news
        assert tree.on_readable() == 0
    finally:
        tree.close()


@needs_inotify
def test_a_flood_of_events_never_holds_the_loop_in_one_call(tmp_path: Path) -> None:
    """Found in review (F1): a full read is followed by another, but at most `READS_AT_ONCE` of them
    in one call; what a child keeps queued beyond that is read on a later turn of the loop, all of it."""
    requests = tmp_path / "sessions" / "s1" / "requests"
    requests.mkdir(parents=True)
    tree = _SessionTree(tmp_path / "sessions", Anchor(tmp_path, "forwarding root"))
    try:
        tree.start()
        tree.on_readable()
        tree.take()  # the start's full rescan
        stem = "x" * 230
        flood = READS_AT_ONCE * READ_SIZE // (HEADER.size + 240) + 2_000  # more than the calls' reads
        for i in range(flood):
            os.close(os.open(requests / f"{stem}{i:05d}.json", os.O_CREAT | os.O_WRONLY, 0o600))
        sizes = [tree.on_readable()]
        assert sizes[0] <= READS_AT_ONCE * READ_SIZE
        while sizes[-1]:
            sizes.append(tree.on_readable())
        assert len(sizes) > 2 and sum(sizes) >= flood * (HEADER.size + 240)  # every event read
        assert tree.take() == {"s1"}
    finally:
        tree.close()


class _Loop:
    """The event loop as `_Reading` uses it: its time, its timers and its readers, driven by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.reading = False

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((delay, callback))

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        self.reading = True

    def remove_reader(self, fd: int) -> None:
        self.reading = False

    def fire(self, after: float = 1e-6) -> float:
        """Run the one timer waiting (after its delay, plus `after`: a timer is never early); its delay."""
        (delay, callback), = self.timers
        self.timers.clear()
        self.now += delay + after
        callback()
        return delay


class _Events:
    """What each read finds, in bytes, in turn (the descriptor `_Reading` adds a reader for)."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

        self.descriptors = (-1,)

    def on_readable(self) -> int:
        return self.sizes.pop(0)


def _reading(sizes: list[int]) -> tuple[_Reading, _Loop]:
    loop = _Loop()
    reading = _Reading(loop, _Events(sizes))  # type: ignore[arg-type]  # the loop's parts it uses
    reading.pause(False)
    return reading, loop


def test_a_burst_is_read_in_stretches_that_grow_to_the_longest() -> None:
    bulk = 8 * 1024
    reading, loop = _reading([48] + [bulk] * 6 + [0])
    reading.readable()  # the first event after a quiet moment: read at once, nothing gathered
    assert loop.timers == [] and loop.reading
    loop.now += 0.0001
    reading.readable()  # a burst: the rest gathered
    assert not loop.reading
    waits = [loop.fire() for _ in range(5)]
    assert waits == [GATHER_S, 2 * GATHER_S, 4 * GATHER_S, GATHER_MAX_S, GATHER_MAX_S]
    loop.fire()  # the read that found nothing: the burst is over
    assert loop.timers == [] and loop.reading and reading.wait == GATHER_S


def test_asks_one_after_the_other_never_wait_longer_than_a_gather() -> None:
    """Each ask's three events (renamed in, answered, removed) are small reads: a wait, if any, is
    `GATHER_S`, never one grown by the burst before them."""
    reading, loop = _reading([65_000, 65_000, 144, 48, 96, 48, 0])
    reading.readable()
    assert [loop.fire(), loop.fire()] == [GATHER_S, 2 * GATHER_S]  # a burst, then a small read
    assert loop.timers == [] and reading.wait == GATHER_S
    for _ in range(2):
        loop.now += 0.0005
        reading.readable()  # an ask's events soon after the last read
        assert loop.fire() == GATHER_S
    assert loop.timers == []


def test_a_look_that_finds_nothing_gathers_nothing() -> None:
    """The look after a rescan (what queued meanwhile) finding nothing starts no wait: an ask renamed
    in a moment later is read at once."""
    reading, loop = _reading([48, 0, 0])
    reading.readable()
    loop.now += 0.0001
    reading.readable()
    assert loop.timers == [] and loop.reading
    loop.now += 0.0001
    reading.readable()
    assert loop.timers == [] and loop.reading
