"""Intake on real files: one trip lists, reads (bounded) and checks; a bad file becomes a rejection."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from core.disk.tree import UnsafeFolder
from core.forwarding.inbox import SessionInbox
from core.history import HistoryStore
from core.person import DecisionRefused, Person
from core.serving.intake import (
    LIST_BYTES,
    READ_BUDGET,
    FileRead,
    Listing,
    existing_responses,
    list_requests,
    rejection,
    scan,
    take_in,
)
from core.serving.verdicts import VerdictRecord
from core.vocabulary.asks import AskKey
from core.wire.reader import parse_request
from core.wire.response import deny, encode_response
from tests.helpers import (
    Served,
    read_response_when_written,
    request_body,
    session_dir,
    wait_for,
    write_request,
    write_request_bytes,
)
from tests.history.support import S


def test_one_trip_lists_reads_and_checks_what_is_new(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for rid in ("a", "b", "c"):
        write_request(root, S, rid)
    (session_dir(root, S) / "responses" / "b.json").write_text("{}")
    found = scan(SessionInbox(root, S), frozenset({"a.json"}), None)
    names, intake = found.names, found.intake
    assert names == ["a.json", "b.json", "c.json"]
    assert intake is not None and [name for name, _ in intake.reads] == ["b.json", "c.json"]
    assert intake.responses == {"b.json"}
    assert all(read.parsed is not None and rejection(n, read, S) is None for n, read in intake.reads)
    assert scan(SessionInbox(root, S), frozenset(names), None).intake is None


def test_a_file_renamed_over_a_watched_name_is_found_replaced_and_read_again(tmp_path: Path) -> None:
    """Issue 20: the identity read with an ask's bytes (inode, size, mtime) is compared at each listing;
    a file renamed over the name is `replaced` and read as new, one left alone is not."""
    root = tmp_path / "root"
    for rid in ("a", "b"):
        write_request(root, S, rid, value="ls")
    inbox = SessionInbox(root, S)
    first = scan(inbox, frozenset(), None).intake
    assert first is not None
    watched = {name: read.identity for name, read in first.reads if read.identity is not None}
    assert set(watched) == {"a.json", "b.json"}
    assert scan(inbox, frozenset(watched), None, watched).replaced == frozenset()
    write_request(root, S, "b", value="rm -rf ~")
    again = scan(inbox, frozenset(watched), None, watched)
    assert again.replaced == {"b.json"} and again.to_read == ["b.json"]
    assert again.intake is not None and b"rm -rf" in (again.intake.reads[0][1].raw or b"")


def test_unusable_files_become_rejections_with_a_reason(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_request_bytes(root, S, "junk.json", b"\xff")
    write_request(root, S, "other", targetSessionId="someone-else")
    write_request_bytes(root, S, "renamed.json", json.dumps(request_body("x", S)).encode())
    requests = session_dir(root, S) / "requests"
    (requests / "link.json").symlink_to("/etc/passwd")
    os.mkfifo(requests / "pipe.json")
    names = sorted(p.name for p in requests.iterdir())
    intake = take_in(SessionInbox(root, S), names, None)
    reasons = {name: rejection(name, read, S) for name, read in intake.reads}
    assert "not valid UTF-8" in (reasons["junk.json"] or "")
    assert "symbolic link" in (reasons["link.json"] or "")
    assert "not a regular file" in (reasons["pipe.json"] or "")
    assert "does not match its file name" in (reasons["renamed.json"] or "")
    assert "targets session 'someone-else'" in (reasons["other.json"] or "")
    assert "is not a request id" in (rejection("bad name.json", FileRead(raw=b"{}"), S) or "")


def test_a_withdrawn_file_is_gone_and_memory_is_bounded(tmp_path: Path) -> None:
    root = tmp_path / "root"
    big = json.dumps(request_body("big", S, message="x" * 900_000)).encode()
    count = READ_BUDGET // len(big) + 3
    for i in range(count):
        write_request_bytes(root, S, f"big{i:03d}.json", big.replace(b'"big"', f'"big{i:03d}"'.encode()))
    names = [f"big{i:03d}.json" for i in range(count)] + ["gone.json"]
    intake = take_in(SessionInbox(root, S), names, None)
    assert len(intake.reads) < count  # a trip stops at the byte budget; the rest comes next trip
    assert sum(len(read.raw or b"") for _, read in intake.reads) < READ_BUDGET + len(big)
    [(_, gone)] = take_in(SessionInbox(root, S), ["gone.json"], None).reads
    assert gone.gone


def test_recorded_verdicts_are_looked_up_once_for_the_trip(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_request(root, S, "seen")
    write_request(root, S, "new")
    history = HistoryStore.in_state_dir(tmp_path / "state")
    parsed = parse_request((session_dir(root, S) / "requests" / "seen.json").read_bytes())
    response = deny(responder=S, at_ms=1, decided_by=None, reason="no")
    from core.vocabulary.asks import AskKey

    body = encode_response(response)
    history.record_verdicts([VerdictRecord(AskKey(S, "seen.json"), parsed, response, body, "rule")])
    intake = take_in(SessionInbox(root, S), ["new.json", "seen.json"], history)
    assert set(intake.recorded) == {"seen"} and intake.recorded["seen"].body == body
    assert not intake.recorded["seen"].written
    history.close()


def test_responses_are_looked_up_per_id_never_through_a_path(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_request(root, S, "a")
    inbox = SessionInbox(root, S)
    responses = session_dir(root, S) / "responses"
    responses.rmdir()
    assert existing_responses(inbox, ["a"]) == frozenset()  # no responses/ folder
    responses.mkdir()
    (responses / "a.json").write_text("{}")
    (responses / "b.json").symlink_to("/nonexistent")  # an entry counts, and is never followed
    ids = ["a", "b", "c", "../requests/a", "x" * 300]
    assert existing_responses(inbox, ids) == {"a.json", "b.json"}


# --------------------------------------------------------------------------------------------------
# An inbox that cannot be listed for a while withdraws none of the asks a person holds.
#
# A session folder (or its `requests/`) moved away and back, or swapped for a link meanwhile, used to
# list as empty: every undecided ask was reported withdrawn (dropped from the person's queue), then
# served as a new ask when the folder came back, so a person could decide it twice, or lose the one
# under the cursor. Only a listing of an existing folder that lacks a file withdraws its ask.
#
# A real core, a real person's queue (`Person`), real folders renamed in `tmp_path`.


async def held_ask(served: Served, person: Person, request_id: str) -> AskKey:
    """A request written and waiting in front of the person."""
    write_request(served.root, S, request_id)
    key = AskKey(S, f"{request_id}.json")
    await wait_for(lambda: person.awaiting(key), what=f"{request_id} in front of the person")
    return key


async def still_held_then_answered_once(served: Served, person: Person, key: AskKey) -> None:
    """The ask stayed in the queue, arrived once; the person's decision answers it once."""
    assert "withdrawn" not in served.kinds() and person.awaiting(key)
    assert [e.key for e in served.events if e.kind == "arrived"] == [key]
    decided = await person.approve_once(key)
    assert decided.ask.key == key
    body = await read_response_when_written(served.root, S, key.name.removesuffix(".json"))
    assert body["state"] == "approved"
    await served.core.rescan_all()
    kinds = served.kinds()
    assert kinds.count("arrived") == 1 and kinds.count("answered") == 1, kinds
    assert "withdrawn" not in kinds and not person.pending()


async def test_requests_moved_away_and_back_withdraw_nothing_and_answer_once(tmp_path: Path) -> None:
    person = Person()
    async with Served(tmp_path, person) as served:
        key = await held_ask(served, person, "kept")
        requests = session_dir(served.root, S) / "requests"
        away = session_dir(served.root, S) / "requests.away"
        os.rename(requests, away)
        await served.core.rescan_all()
        assert "withdrawn" not in served.kinds() and person.awaiting(key)
        os.rename(away, requests)
        await served.core.rescan_all()
        await still_held_then_answered_once(served, person, key)


async def test_session_folder_moved_away_linked_and_back_withdraws_nothing(tmp_path: Path) -> None:
    person = Person()
    async with Served(tmp_path, person) as served:
        key = await held_ask(served, person, "kept")
        folder, away = session_dir(served.root, S), tmp_path / "away"
        os.rename(folder, away)
        await served.core.rescan_all()
        assert "withdrawn" not in served.kinds() and person.awaiting(key)
        folder.symlink_to(away, target_is_directory=True)  # refused (`UnsafeFolder`), never followed
        await served.core.rescan_all()
        assert "unsafe_folder" in served.kinds()
        assert "withdrawn" not in served.kinds() and person.awaiting(key)
        folder.unlink()
        os.rename(away, folder)
        await served.core.rescan_all()
        await still_held_then_answered_once(served, person, key)


async def test_a_decision_while_the_folder_is_away_or_refused_is_refused_and_the_ask_waits(
    tmp_path: Path,
) -> None:
    """The person decides the ask under the cursor while its file cannot be read: nothing is written,
    the person is told why, and the ask stays in its place to be decided once the folder is back."""
    person = Person()
    async with Served(tmp_path, person) as served:
        key = await held_ask(served, person, "kept")
        folder, away = session_dir(served.root, S), tmp_path / "away"
        os.rename(folder, away)
        with pytest.raises(DecisionRefused, match="cannot be read"):
            await person.approve_once(key)
        assert person.awaiting(key)
        folder.symlink_to(away, target_is_directory=True)
        with pytest.raises(DecisionRefused, match="cannot be read"):
            await person.deny(key, "not through a link")
        assert person.awaiting(key)
        folder.unlink()
        os.rename(away, folder)
        await served.core.rescan_all()
        await still_held_then_answered_once(served, person, key)


async def test_a_file_gone_from_its_existing_folder_is_still_withdrawn(tmp_path: Path) -> None:
    person = Person()
    async with Served(tmp_path, person) as served:
        gone = await held_ask(served, person, "gone")
        (session_dir(served.root, S) / "requests" / "gone.json").unlink()
        await served.core.rescan_all()
        assert [e.key for e in served.events if e.kind == "withdrawn"] == [gone]
        assert not person.awaiting(gone)
        # A `requests/` emptied and made anew under the same name is a listing of an existing folder.
        fresh = await held_ask(served, person, "fresh")
        requests = session_dir(served.root, S) / "requests"
        shutil.rmtree(requests)
        requests.mkdir()
        await served.core.rescan_all()
        assert [e.key for e in served.events if e.kind == "withdrawn"] == [gone, fresh]
        assert not person.pending()


def _aged(folder: Path, seconds: float) -> None:
    """The folder's times as if it last changed `seconds` ago (its ctime moves to now: set it first)."""
    info = folder.stat()
    os.utime(folder, ns=(info.st_atime_ns, info.st_mtime_ns - int(seconds * 1e9)))


def test_a_settled_listing_is_reused_until_the_folder_changes(tmp_path: Path) -> None:
    """Issue 37: a safety pass reuses the names while `requests/` is exactly as listed, if it had last
    changed well before that listing; a file added, removed or renamed in lists again."""
    root = tmp_path / "root"
    write_request(root, S, "a")
    inbox = SessionInbox(root, S)
    requests = session_dir(root, S) / "requests"
    fresh = list_requests(inbox)
    assert fresh is not None and fresh.names == ["a.json"]
    assert not fresh.settled  # just written: never reused, whatever its times say later
    assert list_requests(inbox, fresh) is not fresh
    _aged(requests, 60)
    # The folder's ctime is the moment of the `utime`: reused only once that too is old enough.
    assert not list_requests(inbox).settled  # type: ignore[union-attr]
    settled = Listing(listed_stamp(requests), ["a.json"], True)
    assert list_requests(inbox, settled) is settled
    write_request(root, S, "b")
    again = list_requests(inbox, settled)
    assert again is not settled and again is not None and again.names == ["a.json", "b.json"]
    (requests / "a.json").unlink()
    assert list_requests(inbox, again if again.settled else settled).names == ["b.json"]  # type: ignore[union-attr]
    kept = Listing(listed_stamp(requests), ["b.json", "ghost.json"], True)
    found = scan(inbox, frozenset(), None, kept=kept)
    assert found.names == ["b.json", "ghost.json"]  # unchanged folder: the kept names as they were


def test_a_reused_listing_still_refuses_an_unsafe_inbox(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_request(root, S, "a")
    inbox = SessionInbox(root, S)
    requests = session_dir(root, S) / "requests"
    kept = Listing(listed_stamp(requests), ["a.json"], True)
    responses = session_dir(root, S) / "responses"
    shutil.rmtree(responses)
    responses.symlink_to(tmp_path)
    with pytest.raises(UnsafeFolder):
        list_requests(inbox, kept)
    shutil.rmtree(session_dir(root, S))
    assert list_requests(inbox, kept) is None  # the inbox gone: nothing listed, nothing reused


def listed_stamp(folder: Path) -> tuple[int, int, int, int]:
    info = folder.stat()
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)


_ENTRY = st.sampled_from(["file", "folder", "link", "dangling"])


@settings(max_examples=120, deadline=None)
@given(present=st.dictionaries(st.from_regex(r"[a-c]{1,2}", fullmatch=True), _ENTRY, max_size=6),
       others=st.integers(0, 40), ids=st.lists(st.sampled_from(
           ["a", "b", "c", "aa", "ab", "cc", "..", "../a", "a/b", "x" * 300, "é"]), max_size=12),
       times=st.integers(1, 12))
def test_responses_found_by_a_listing_or_by_a_look_are_those_there(
    present: dict[str, str], others: int, ids: list[str], times: int,
) -> None:
    """Whichever way `existing_responses` takes (a listing of a small folder, a look per name in a
    larger one: `LIST_BYTES`), it finds exactly the safe ids' entries there, of any kind, never
    followed."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        write_request(root, S, "a")
        responses = session_dir(root, S) / "responses"
        for stem, kind in present.items():
            entry = responses / f"{stem}.json"
            if kind == "file":
                entry.write_text("{}")
            elif kind == "folder":
                entry.mkdir()
            else:
                entry.symlink_to(responses / "a.json" if kind == "link" else "/nonexistent")
        for index in range(others):  # answers of other asks, so both ways are taken across examples
            (responses / f"other-{index}.json").write_text("{}")
        ids = ids * times  # (an id twice is looked for twice)
        safe = {i for i in ids if i not in {"..", "../a", "a/b", "x" * 300, "é"}}
        there = {f"{i}.json" for i in safe if os.path.lexists(responses / f"{i}.json")}
        listed = 0 < os.stat(responses).st_size <= LIST_BYTES * len([i for i in ids if i in safe])
        event("listed" if listed else "looked up")
        assert existing_responses(SessionInbox(root, S), ids) == there


def test_a_refused_responses_folder_is_refused_with_no_id_to_look_up(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_request(root, S, "a")
    responses = session_dir(root, S) / "responses"
    responses.rmdir()
    (tmp_path / "elsewhere").mkdir()
    responses.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeFolder):
        existing_responses(SessionInbox(root, S), [])
