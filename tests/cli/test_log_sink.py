"""`tui.commands.log_sink`: the log lines of one loop turn are written together, unchanged, in order."""

from __future__ import annotations

import asyncio
import io
import logging

from core.text import LineFormatter
from tui.commands.log_sink import TurnBufferedHandler


class Writes(io.StringIO):
    """A stream that remembers each write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def logger(stream: Writes) -> logging.Logger:
    log = logging.getLogger(f"pi_authorizer.test_sink.{id(stream)}")
    handler = TurnBufferedHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


async def test_one_write_per_loop_turn_in_order() -> None:
    stream = Writes()
    log = logger(stream)
    for n in range(3):
        log.info("ask %d answered", n)
    assert stream.writes == []
    await asyncio.sleep(0)
    assert stream.writes == ["INFO ask 0 answered\nINFO ask 1 answered\nINFO ask 2 answered\n"]
    log.info("next turn")
    await asyncio.sleep(0)
    assert stream.writes[1:] == ["INFO next turn\n"]


async def test_a_warning_is_written_at_once_with_what_came_before() -> None:
    stream = Writes()
    log = logger(stream)
    log.info("first")
    log.warning("disk full")
    assert stream.getvalue() == "INFO first\nWARNING disk full\n"
    await asyncio.sleep(0)
    assert stream.getvalue() == "INFO first\nWARNING disk full\n"


def test_off_the_loop_a_line_is_written_at_once() -> None:
    stream = Writes()
    log = logger(stream)
    log.info("from a worker")
    assert stream.writes == ["INFO from a worker\n"]


async def test_lines_from_a_worker_thread_keep_their_order() -> None:
    stream = Writes()
    log = logger(stream)
    log.info("on the loop")
    await asyncio.to_thread(log.info, "on a worker")
    await asyncio.sleep(0)
    assert stream.getvalue() == "INFO on the loop\nINFO on a worker\n"


def test_a_line_stamp_is_formatted_once_a_second_and_always_right() -> None:
    """`LineFormatter` keeps the last second's stamp (a burst logs thousands of lines in one); a new
    second, or the default format with its milliseconds, is formatted afresh."""
    formatter = LineFormatter("%(asctime)s %(message)s", "%Y-%m-%dT%H:%M:%S")
    plain = logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%dT%H:%M:%S")
    default, plain_default = LineFormatter("%(asctime)s"), logging.Formatter("%(asctime)s")
    for created in (1_800_000_000.1, 1_800_000_000.9, 1_800_000_001.0, 1_700_000_000.5, 1_800_000_000.2):
        record = logging.LogRecord("pi_authorizer", logging.INFO, "x", 1, "line", None, None)
        record.created, record.msecs = created, (created % 1) * 1000
        assert formatter.format(record) == plain.format(record)
        assert default.format(record) == plain_default.format(record)
