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
from tests.helpers import session_dir, write_request_bytes
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
