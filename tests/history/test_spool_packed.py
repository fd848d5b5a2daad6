"""The spool is written packed (one zlib stream after a `#zlib` line, a request's bytes once) and read
back exactly; a spool of plain lines (as written before) is still read; a damaged or cut stream gives
the lines before the fault and says so; one unpacking past the limit is not read past it."""

from __future__ import annotations

import json
import logging
import zlib
from pathlib import Path

import pytest

from core.history import spool
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from core.wire.response import encode_response
from tests.history.support import HISTORY_REFUSED, SPOOL_DENIAL


def _raw(i: int, message: str = "make") -> bytes:
    return json.dumps({"id": f"r{i}", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                       "requesterAgentName": "Explore", "message": message, "surface": "bash",
                       "value": f"make {i}"}).encode()


def _events(count: int) -> list[ServeEvent]:
    events = []
    for i in range(count):
        raw = _raw(i)
        if i % 3 == 0:  # an arrival whose file's bytes are not the request's (a courier's parcel, say)
            events.append(ServeEvent("arrived", AskKey("s", f"r{i}.json"), 10.0 + i, parse_request(raw),
                                     raw=b"parcel " + raw))
        else:
            events.append(ServeEvent("answered", AskKey("s", f"r{i}.json"), 10.0 + i, parse_request(raw),
                                     SPOOL_DENIAL, "fail-safe", HISTORY_REFUSED, raw=raw))
    # An arrival whose file's bytes are not known (an arrival without its request is never queued).
    events.append(ServeEvent("arrived", AskKey("s", "gone.json"), 99.0, parse_request(_raw(99)), raw=None))
    # Notes a full disk refused (queued since campaign10's finding 3), with and without the request.
    events.append(ServeEvent("withdrawn", AskKey("s", "r1.json"), 100.0, parse_request(_raw(1))))
    events.append(ServeEvent("contested", AskKey("s", "r2.json"), 101.0, None, reason="another server"))
    return events


def _seen(event: ServeEvent) -> tuple[object, ...]:
    """What a spooled event carries, compared whole."""
    return (event.kind, event.key, event.at, event.outcome, event.reason, event.raw,
            event.parsed.raw if event.parsed else None,
            encode_response(event.response) if event.response else None)


def _same(a: ServeEvent, b: ServeEvent) -> bool:
    return _seen(a) == _seen(b)


def test_a_packed_spool_reads_back_every_event_exactly(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"
    events = _events(60)
    spool.save(history, events)
    data = (tmp_path / spool.spool_name(history)).read_bytes()
    assert data.startswith(spool.COMPRESSED)
    back = spool.load(history)
    assert len(back) == len(events) and all(_same(a, b) for a, b in zip(events, back, strict=True))


def test_the_usual_close_packs_to_a_tenth(tmp_path: Path) -> None:
    """What makes the reserve hold a stop's closes: ~1.4 KB a plain line before, ~0.1 KB packed."""
    history = tmp_path / "history.sqlite3"
    events = [e for e in _events(600) if e.kind == "answered"]
    spool.save(history, events)
    size = (tmp_path / spool.spool_name(history)).stat().st_size
    assert size / len(events) < 150


def test_a_spool_of_plain_lines_is_still_read(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"
    events = _events(9)
    lines = [json.dumps({**spool._encoded(e), "raw": spool._b64(e.raw)}).encode() + b"\n" for e in events]
    (tmp_path / spool.spool_name(history)).write_bytes(b"".join(lines))
    back = spool.load(history)
    assert len(back) == len(events) and all(_same(a, b) for a, b in zip(events, back, strict=True))


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_damaged_stream_gives_the_lines_before_the_fault(
        tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    history = tmp_path / "history.sqlite3"
    events = _events(3000)
    lines = [json.dumps(spool._encoded(e)).encode() + b"\n" for e in events]
    whole = spool.packed(lines)
    if damage == "cut":
        data = whole[: len(whole) // 2]
    else:
        data = whole[: len(whole) // 2] + bytes([whole[len(whole) // 2] ^ 0xFF]) + whole[len(whole) // 2 + 1:]
    (tmp_path / spool.spool_name(history)).write_bytes(data)
    with caplog.at_level(logging.ERROR, logger="pi_authorizer.history"):
        back = spool.load(history)
    assert 0 < len(back) < len(events)
    assert all(_same(a, b) for a, b in zip(events, back, strict=False))  # the first ones, exactly
    assert "history spool" in caplog.text


def test_a_stream_unpacking_past_the_limit_is_not_read_past_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    history = tmp_path / "history.sqlite3"
    line = json.dumps(spool._encoded(_events(2)[1])).encode() + b"\n"
    (tmp_path / spool.spool_name(history)).write_bytes(spool.COMPRESSED + zlib.compress(line * 20_000))
    monkeypatch.setattr(spool, "MAX_SPOOL_BYTES", 1 << 20)
    with caplog.at_level(logging.ERROR, logger="pi_authorizer.history"):
        back = spool.load(history)
    assert 0 < len(back) <= (1 << 20) // len(line)
    assert "unpacks to over" in caplog.text
