"""Inbox layout, hostile-safe reading, answering once, quarantine: real files in temp folders."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from core.disk.paths import InvalidSessionId, encode_session_id, is_safe_request_id
from core.forwarding.inbox import SessionInbox, UnreadableRequest
from core.serving.quarantine import Quarantine
from tests.helpers import write_request


@pytest.mark.parametrize(
    ("session_id", "folder"),
    [
        ("019ff969-c34c-70be-9034-fae19c852932", "019ff969-c34c-70be-9034-fae19c852932"),
        ("parent session/ü 2", "parent%20session%2F%C3%BC%202"),
        ("  padded  ", "padded"),
        ("a!~*'()b", "a!~*'()b"),
        ("../..", "..%2F.."),
        ("x\x00y", "x%00y"),
    ],
)
def test_session_folder_is_encode_uri_component_of_trimmed_id(session_id: str, folder: str) -> None:
    assert encode_session_id(session_id) == folder


@pytest.mark.parametrize("session_id", ["", "   ", "unknown", "UNKNOWN", "\ud800"])
def test_ids_that_name_no_session_are_refused(session_id: str) -> None:
    with pytest.raises(InvalidSessionId):
        encode_session_id(session_id)


@pytest.mark.parametrize(
    ("value", "safe"),
    [("1752600000123-k3j9x0qa-48211", True), ("toolu_01AbCdEf", True), ("a/b", False),
     ("..", False), ("ü", False), ("a b", False), ("", False)],
)
def test_safe_request_id(value: str, safe: bool) -> None:
    assert is_safe_request_id(value) is safe


def test_response_is_written_once_owner_only_and_complete(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path, "S")
    assert inbox.write_response("r1", b'{"first":1}') is True
    assert inbox.write_response("r1", b'{"second":2}') is False
    target = inbox.response_path("r1")
    assert target.read_bytes() == b'{"first":1}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(inbox.responses_dir.stat().st_mode) == 0o700
    assert os.listdir(inbox.responses_dir) == ["r1.json"]  # no temp file left behind


def test_response_id_cannot_choose_a_path(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path, "S")
    for bad in ("../escape", "..", "", "a\x00b"):
        with pytest.raises(ValueError):
            inbox.write_response(bad, b"{}")
    assert not (tmp_path / "sessions" / "S" / "escape.json").exists()


def test_listing_is_sorted_and_skips_temp_files(tmp_path: Path) -> None:
    write_request(tmp_path, "S", "b")
    write_request(tmp_path, "S", "a")
    inbox = SessionInbox(tmp_path, "S")
    (inbox.requests_dir / "c.json.123.456.tmp").write_text("{}")
    assert inbox.list_request_names() == ["a.json", "b.json"]
    assert SessionInbox(tmp_path, "other").list_request_names() == []


def test_symlink_is_never_followed(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path, "S")
    inbox.requests_dir.mkdir(parents=True)
    secret = tmp_path / "secret.json"
    secret.write_text('{"id":"x"}')
    (inbox.requests_dir / "link.json").symlink_to(secret)
    with pytest.raises(UnreadableRequest, match="symbolic link"):
        inbox.read_request("link.json")


def test_fifo_does_not_block_and_is_refused(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path, "S")
    inbox.requests_dir.mkdir(parents=True)
    os.mkfifo(inbox.requests_dir / "pipe.json")
    with pytest.raises(UnreadableRequest, match="not a regular file"):
        inbox.read_request("pipe.json")


def test_directory_and_oversized_files_are_refused(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path, "S")
    (inbox.requests_dir / "dir.json").mkdir(parents=True)
    with pytest.raises(UnreadableRequest, match="not a regular file"):
        inbox.read_request("dir.json")
    (inbox.requests_dir / "big.json").write_bytes(b" " * (1024 * 1024 + 1))
    with pytest.raises(UnreadableRequest, match="over the 1048576-byte limit"):
        inbox.read_request("big.json")


def test_files_of_every_size_up_to_the_limit_are_read_whole(tmp_path: Path) -> None:
    """A read stops at the first short read once the size seen at open is read: a file of a read's
    size, of several, and of exactly the limit still come whole."""
    inbox = SessionInbox(tmp_path, "S")
    inbox.requests_dir.mkdir(parents=True)
    for size in (0, 1, 65535, 65536, 65537, 3 * 65536, 1024 * 1024):
        data = bytes(i % 251 for i in range(size))
        (inbox.requests_dir / f"{size}.json").write_bytes(data)
        assert inbox.read_request(f"{size}.json") == data


def test_withdrawn_file_reads_as_not_found(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path, "S")
    with pytest.raises(FileNotFoundError):
        inbox.read_request("gone.json")


def test_quarantine_keeps_bytes_and_reason(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path / "root", "S")
    path = write_request(tmp_path / "root", "S", "r1")
    original = path.read_bytes()
    record = Quarantine(tmp_path / "state").hold(inbox, "r1.json", "because", answered=True)
    assert not path.exists()
    assert record.moved_to is not None and record.moved_to.read_bytes() == original
    reason = json.loads(record.reason_file.read_bytes())
    assert reason["reason"] == "because" and reason["childAnswered"] is True
    assert reason["sessionId"] == "S"


def test_quarantine_moves_a_symlink_itself_and_records_its_target(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path / "root", "S")
    inbox.requests_dir.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (inbox.requests_dir / "evil.json").symlink_to(victim)
    record = Quarantine(tmp_path / "state").hold(inbox, "evil.json", "symlink", answered=False)
    assert victim.read_text() == "keep me"
    assert record.moved_to is not None and record.moved_to.is_symlink()
    assert json.loads(record.reason_file.read_bytes())["symlinkTarget"] == str(victim)


def test_quarantine_handles_names_that_are_not_utf8(tmp_path: Path) -> None:
    inbox = SessionInbox(tmp_path / "root", "S")
    inbox.requests_dir.mkdir(parents=True)
    raw_name = os.fsdecode(b"bad\xff\xfename.json")
    (inbox.requests_dir / raw_name).write_bytes(b"{}")
    record = Quarantine(tmp_path / "state").hold(inbox, raw_name, "odd name", answered=False)
    assert record.moved_to is not None and record.moved_to.read_bytes() == b"{}"
    assert "%FF%FE" in record.moved_to.name
