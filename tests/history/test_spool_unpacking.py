"""A packed spool is unpacked a chunk at a time: a line longer than a chunk (a large request) is read
back whole, wherever the chunks cut it, and an unended last line is still read. The line not ended yet
is kept in pieces and joined once: joined again at each chunk (as first written), a hostile spool of
one long line cost time quadratic in its length (64 KiB packed, one 64 MiB line: ~47 s of CPU; now
~0.2 s; measured in the review of ea45d2e at load 1.4-8), which no test asserts (no speed in tests)."""

from __future__ import annotations

import json
import logging
import os
import zlib
from pathlib import Path

import pytest

from core.history import spool
from core.vocabulary.asks import AskKey
from tests.history.support import spooled_close


def test_lines_longer_than_a_chunk_read_back_whole(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"
    # Requests that do not pack (random text), from a few bytes to several chunks long.
    sizes = (10, 200_000, 3, 70_000, 1, 131_072)
    events = [spooled_close(i, os.urandom(size).hex()) for i, size in enumerate(sizes)]
    spool.save(history, events)
    back = spool.load(history)
    assert [(e.key, e.raw, e.parsed.raw if e.parsed else None) for e in back] == [
        (e.key, e.raw, e.parsed.raw if e.parsed else None) for e in events]


def test_a_last_line_without_its_end_is_still_read(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"
    events = [spooled_close(i, "x" * 600) for i in range(3)]
    lines = [json.dumps(spool._encoded(e)).encode() + b"\n" for e in events]
    data = b"".join(lines).removesuffix(b"\n")
    (tmp_path / spool.spool_name(history)).write_bytes(spool.COMPRESSED + zlib.compress(data))
    assert [e.key for e in spool.load(history)] == [e.key for e in events]


def test_a_hostile_spool_of_one_long_line_is_read_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    history = tmp_path / "history.sqlite3"
    (tmp_path / spool.spool_name(history)).write_bytes(spool.COMPRESSED + zlib.compress(b"a" * (8 << 20), 9))
    with caplog.at_level(logging.ERROR, logger="pi_authorizer.history"):
        assert spool.load(history) == []
    assert "line 1 is unreadable" in caplog.text


@pytest.mark.parametrize("packed", [True, False])
def test_a_spool_of_many_unreadable_lines_is_said_in_a_few_log_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, packed: bool
) -> None:
    """Each unreadable line was logged: a spool of a million empty lines (1 KB packed) logged a million
    errors (~20 s of CPU, and a log as large as the disk could hold). The first few are said, the rest
    counted; the readable lines among them still count."""
    history = tmp_path / "history.sqlite3"
    good = json.dumps(spool._encoded(spooled_close(1, "make"))).encode()
    data = b"\n" * 5000 + good + b"\n" + b"{}\n" * 5000
    written = spool.COMPRESSED + zlib.compress(data) if packed else data
    (tmp_path / spool.spool_name(history)).write_bytes(written)
    with caplog.at_level(logging.ERROR, logger="pi_authorizer.history"):
        assert [e.key for e in spool.load(history)] == [AskKey("s", "r1.json")]
    assert len(caplog.records) <= 20
    assert "9990 more history spool lines are unreadable" in caplog.text

