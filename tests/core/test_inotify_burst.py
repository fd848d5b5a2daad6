"""A read of inotify events told apart at once (`core.forwarding.inotify.burst`: a burst's events, all of
one watch and one name length) says what a walk of the events one by one says, and the watchers'
parsers tell such a read as their walk tells it (`_SessionTree._parse` and `Outboxes._parse` against
their `_parse_each`): the same folders to rescan, the same removals asked about in the same order,
the same names in a view, the same foreign temps and overflows. Names are decoded at once as each
would be alone (`watch.decoded`). Real inotify instances and folders; the reads are made here, as the
kernel lays them out, so every shape a read can take is tried."""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from itertools import compress
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core import platform
from core.disk.tree import Anchor
from core.forwarding.inotify import (
    FS_ENCODING,
    FS_ERRORS,
    HEADER,
    IN_ATTRIB,
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    burst,
)
from core.forwarding.outbox import Outboxes
from core.forwarding.watch import _SessionTree, decoded
from tests.helpers import needs_inotify

Raw = tuple[int, int, bytes]  # an event: watch, mask, name

NAME_BYTES = st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\0", b"x").replace(b"/", b"y"))
MASKS = st.sampled_from([IN_CREATE, IN_MOVED_TO, IN_DELETE, IN_MOVED_FROM, IN_CLOSE_WRITE, IN_ATTRIB])


def laid_out(events: Sequence[Raw], pad: int = 0) -> bytes:
    """The events as the kernel writes them: a header, then the name, its NUL and padding to a multiple
    of 16 bytes (`pad` more blocks of 16: the kernel may pad more)."""
    out = bytearray()
    for wd, mask, name in events:
        padded = 0 if not name else -(-(len(name) + 1) // 16) * 16 + 16 * pad
        out += HEADER.pack(wd, mask, 7, padded) + name.ljust(padded, b"\0")
    return bytes(out)


def walked(data: bytes) -> list[Raw]:
    """The events of a read, one by one."""
    events, offset = [], 0
    while offset + HEADER.size <= len(data):
        wd, mask, _cookie, length = HEADER.unpack_from(data, offset)
        offset += HEADER.size
        events.append((wd, mask, data[offset:offset + length].rstrip(b"\0")))
        offset += length
    return events


def alike(wd: int, length: int) -> st.SearchStrategy[list[Raw]]:
    """A burst's read: one watch, names of one length (most of them requests')."""
    names = st.one_of(
        st.binary(min_size=length, max_size=length).map(lambda b: b.replace(b"\0", b"a").replace(b"/", b"b")),
        st.binary(min_size=length - 5, max_size=length - 5).map(
            lambda b: b.replace(b"\0", b"a").replace(b"/", b"b") + b".json"),
    )
    return st.lists(st.tuples(st.just(wd), MASKS, names), min_size=1, max_size=40)


READS = st.one_of(
    st.integers(6, 60).flatmap(lambda n: alike(3, n)),
    st.lists(st.tuples(st.sampled_from([1, 2, 3]), MASKS, NAME_BYTES), min_size=0, max_size=20),
    st.lists(st.tuples(st.sampled_from([3]), st.sampled_from([IN_DELETE, IN_MOVED_TO, IN_IGNORED]),
                       st.sampled_from([b"", b"abc.json", b"abd.json"])), max_size=8),
)


@settings(max_examples=400, deadline=None)
@given(events=READS, pad=st.integers(0, 2))
def test_a_burst_is_what_a_walk_of_its_events_finds(events: list[Raw], pad: int) -> None:
    data = laid_out(events, pad)
    found = burst(data)
    seen = walked(data)
    if found is None:
        same = {(wd, len(name)) for wd, _mask, name in seen}
        sizes = {len(data) // len(seen)} if seen else set()
        # Only a read whose events are alike may be told at once; every such read is.
        assert len(same) != 1 or not next(iter(same))[1] or len(data) != len(seen) * max(sizes)
        return
    assert seen and all(wd == found.wd and len(name) == found.length for wd, _mask, name in seen)
    assert found.masks == [mask for _wd, mask, _name in seen]
    assert found.names() == [name for _wd, _mask, name in seen]
    chosen = [i % 3 == 0 for i in range(len(seen))]
    assert found.names(chosen) == list(compress((name for _wd, _mask, name in seen), chosen))
    for suffix in (b".json", b"n", b"x" * 80, b""):
        assert found.all_end_with(suffix) == all(name.endswith(suffix) for _wd, _mask, name in seen)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(NAME_BYTES, min_size=1, max_size=12))
def test_names_decoded_at_once_are_each_decoded_alone(names: list[bytes]) -> None:
    assert decoded(names) == [name.decode(FS_ENCODING, FS_ERRORS) for name in names]


@needs_inotify
def test_a_session_tree_tells_a_burst_as_it_tells_each_event(tmp_path: Path) -> None:
    (tmp_path / "sessions" / "s1" / "requests").mkdir(parents=True)
    asked: list[tuple[str, list[str]]] = []

    def settled(folder: str, names: Sequence[str]) -> bool:
        asked.append((folder, list(names)))
        return all(name < "m" for name in names)  # some removals answered, some a child's

    tree = _SessionTree(tmp_path / "sessions", Anchor(tmp_path, "forwarding root"), settled)
    try:
        tree.start()
        tree.on_readable()
        (inbox,) = tree.inboxes
        folders, inboxes = dict(tree.folder_of), set(tree.inboxes)
        folder_wd = next(wd for wd, folder in folders.items() if folder == "s1" and wd != inbox)

        def told(data: bytes, each: bool, changed: set[str]) -> tuple[object, ...]:
            tree.folder_of, tree.inboxes = dict(folders), set(inboxes)
            tree.changed, tree.rescan_all = set(changed), False
            asked.clear()
            if each:
                tree._parse_each(data)
            else:
                tree._parse(data)
            return tree.changed, tree.rescan_all, list(asked), tree.folder_of, tree.inboxes

        @settings(max_examples=300, deadline=None)
        @given(events=st.one_of(
            st.integers(6, 60).flatmap(lambda n: alike(inbox, n)),
            st.lists(st.tuples(st.sampled_from([inbox, folder_wd, 99]),
                               st.sampled_from([IN_CREATE, IN_MOVED_TO, IN_DELETE, IN_MOVED_FROM, IN_ATTRIB,
                                                IN_DELETE_SELF, IN_IGNORED]),
                               st.sampled_from([b"", b"ab.json", b"zz.json", b"ab.json.1.2.tmp", b"x"])),
                     max_size=10),
        ), already=st.booleans())
        def check(events: list[Raw], already: bool) -> None:
            data = laid_out(events)
            changed = {"s1"} if already else set()
            assert told(data, False, changed) == told(data, True, changed)

        check()
    finally:
        tree.close()


@needs_inotify
def test_an_outbox_tells_a_burst_as_it_tells_each_event(tmp_path: Path) -> None:
    foreign: list[tuple[str, int, str]] = []
    overflows: list[int] = []
    boxes = Outboxes(lambda *told: foreign.append(told), lambda: overflows.append(1))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert boxes.watch("s1", fd, platform.proc_fd_path(fd))
        (wd,) = boxes._folder_of
        state = dict(boxes._folder_of), dict(boxes._identity), dict(boxes._wd_of)
        temp = f"r1.json.{os.getpid() + 1}.1700000000000.tmp".encode()

        def told(data: bytes, each: bool, viewed: bool) -> tuple[object, ...]:
            folder_of, identity, wd_of = state
            boxes._folder_of, boxes._identity, boxes._wd_of = dict(folder_of), dict(identity), dict(wd_of)
            boxes._views = {wd: ({b"old.json"}, 100)} if viewed else {}
            foreign.clear()
            overflows.clear()
            calls: list[object] = []
            if each:
                boxes._parse_each(data, lambda call, *args: calls.append((call, args)))
            else:
                boxes._parse(data, lambda call, *args: calls.append((call, args)))
            return boxes._views, boxes._folder_of, calls

        @settings(max_examples=300, deadline=None)
        @given(events=st.one_of(
            st.integers(6, 60).flatmap(lambda n: alike(wd, n)),
            st.lists(st.tuples(st.sampled_from([wd, 99, -1]),
                               st.sampled_from([IN_CREATE, IN_MOVED_TO, IN_Q_OVERFLOW, IN_IGNORED]),
                               st.sampled_from([b"", b"ab.json", b"zz.json", temp, b"x"])),
                     max_size=10),
        ), viewed=st.booleans())
        def check(events: list[Raw], viewed: bool) -> None:
            data = laid_out(events)
            assert told(data, False, viewed) == told(data, True, viewed)

        check()
    finally:
        os.close(fd)
        boxes.close()


def test_a_read_of_events_of_two_sizes_is_walked() -> None:
    data = laid_out([(3, IN_MOVED_TO, b"a" * 20), (3, IN_DELETE, b"b" * 40)])
    assert burst(data) is None
    assert burst(struct.pack("iIII", -1, IN_Q_OVERFLOW, 0, 0)) is None
