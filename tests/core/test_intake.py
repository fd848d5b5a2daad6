"""Intake on real files: one trip lists, reads (bounded) and checks; a bad file becomes a rejection."""

from __future__ import annotations

import json
import os
from pathlib import Path

from core.forwarding.inbox import SessionInbox
from core.history import HistoryStore
from core.serving.intake import READ_BUDGET, FileRead, existing_responses, rejection, scan, take_in
from core.serving.verdicts import VerdictRecord
from core.wire.reader import parse_request
from core.wire.response import deny, encode_response
from tests.helpers import request_body, session_dir, write_request, write_request_bytes
from tests.history.support import S


def test_one_trip_lists_reads_and_checks_what_is_new(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for rid in ("a", "b", "c"):
        write_request(root, S, rid)
    (session_dir(root, S) / "responses" / "b.json").write_text("{}")
    names, intake = scan(SessionInbox(root, S), frozenset({"a.json"}), None)
    assert names == ["a.json", "b.json", "c.json"]
    assert intake is not None and [name for name, _ in intake.reads] == ["b.json", "c.json"]
    assert intake.responses == {"b.json"}
    assert all(read.parsed is not None and rejection(n, read, S) is None for n, read in intake.reads)
    assert scan(SessionInbox(root, S), frozenset(names), None)[1] is None


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
    from core.serving.asks import AskKey

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
