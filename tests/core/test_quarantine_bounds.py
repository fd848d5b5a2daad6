"""The quarantine's evidence and bounds (issue 21, finding 7): the evidence is always the request's
bytes as served (never this node's answer written into its file), a huge file is not copied whole, and
the store is bounded by bytes as well as by count."""

from __future__ import annotations

import os
from pathlib import Path

from core.forwarding.inbox import SessionInbox
from core.seams import Seams
from core.serving.quarantine import QUARANTINE_MAX_FILE_BYTES, Quarantine
from core.testing import ManualClock
from tests.helpers import deep_tree, session_dir, write_request_bytes
from tests.history.support import S


def held_files(state: Path) -> list[Path]:
    found = (state / "quarantine").rglob("*")
    return sorted(p for p in found if p.is_file() and not p.name.endswith((".reason.json", ".pending.json")))


def test_the_evidence_is_the_request_as_served_not_what_its_file_holds_now(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    served = b'{"id":"r","note":"the request as it was served"}'
    path = write_request_bytes(root, S, "r.json", served)
    path.write_bytes(b'{"approved":false,"state":"denied_with_reason"}')  # an answer written into it
    Quarantine(state).hold(SessionInbox(root, S), "r.json", "unusable", answered=False, raw=served)
    [held] = held_files(state)
    assert held.read_bytes() == served and not path.exists()


def test_a_huge_request_file_is_not_copied_whole(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    path = write_request_bytes(root, S, "huge.json", b"{")
    with path.open("r+b") as out:
        out.truncate(100 * 1024 * 1024)  # 100 MB (sparse)
    record = Quarantine(state).hold(SessionInbox(root, S), "huge.json", "unusable", answered=False)
    [held] = held_files(state)
    assert held.stat().st_size <= QUARANTINE_MAX_FILE_BYTES and not path.exists()
    assert "100" in record.reason or (state / "quarantine").exists()
    reasons = Quarantine(state).records()
    assert reasons[0]["originalSize"] == 100 * 1024 * 1024


def test_the_store_is_bounded_by_bytes(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    clock = ManualClock()
    quarantine = Quarantine(state, seams=Seams(clock=clock), max_bytes=100_000)
    inbox = SessionInbox(root, S)
    for n in range(10):
        write_request_bytes(root, S, f"f{n}.json", os.urandom(30_000))
        quarantine.hold(inbox, f"f{n}.json", "unusable", answered=False)
        clock.advance(1)
    quarantine.prune()
    sizes = sum(p.stat().st_size for p in (state / "quarantine").rglob("*") if p.is_file())
    assert sizes <= 100_000 + 10_000  # held files and their reasons
    assert [p.name.split("-")[-1] for p in held_files(state)][-1] == "f9.json"  # the newest kept
    assert not (session_dir(root, S) / "requests" / "f0.json").exists()


def test_a_deep_folder_in_requests_is_refused_in_place_and_never_moved_into_the_state_dir(
        tmp_path: Path) -> None:
    # Issue 34 finding 6: a 1,000-deep `deep.json` was moved into the quarantine, then the prune
    # failed with RecursionError and the store grew past its caps.
    root, state = tmp_path / "root", tmp_path / "state"
    write_request_bytes(root, S, "placeholder.json", b"{}")
    inbox = SessionInbox(root, S)
    with deep_tree(inbox.requests_dir / "deep.json", 1_000):
        record = Quarantine(state).hold(inbox, "deep.json", "unusable", answered=False)
        assert record.moved_to is None and record.left_in_place is not None
        assert "refused in place" in record.left_in_place
        assert (inbox.requests_dir / "deep.json").is_dir()
        assert held_files(state) == []  # only its reason is kept
        assert [r["leftInPlace"] for r in Quarantine(state).records()] == [record.left_in_place]


def test_a_deep_tree_already_held_is_pruned_without_recursion_and_the_caps_hold(tmp_path: Path) -> None:
    # A tree an earlier version moved into the quarantine: removed iteratively, and an entry that
    # cannot be removed never keeps the prune from the others.
    root, state = tmp_path / "root", tmp_path / "state"
    clock = ManualClock(1_800_000_000.0)
    quarantine = Quarantine(state, seams=Seams(clock=clock), max_entries=50)
    inbox = SessionInbox(root, S)
    write_request_bytes(root, S, "placeholder.json", b"{}")
    quarantine.hold(inbox, "placeholder.json", "unusable", answered=False)
    [folder] = (state / "quarantine").iterdir()
    [reason] = folder.glob("*.reason.json")
    stem = reason.name.removesuffix(".reason.json")
    (folder / stem).unlink()
    with deep_tree(folder / stem, 3_000):
        for n in range(120):
            clock.advance(1)
            write_request_bytes(root, S, f"j{n}.json", b"x")
            quarantine.hold(inbox, f"j{n}.json", "unusable", answered=False)
        quarantine.prune()
    entries = [p for p in folder.iterdir() if p.name.endswith(".reason.json")]
    assert len(entries) <= 50
    assert not (folder / stem).exists()  # the oldest, the tree, went first
