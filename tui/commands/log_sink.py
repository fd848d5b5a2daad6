"""Where the `pi_authorizer` log lines go: one write per event-loop turn, not one write and flush per line.

A burst of 10,000 asks logs 10,000 lines; written one by one, each is a system call on the serving
thread (and a wait for the interpreter lock when it returns). Here the lines of one loop turn are
joined and written together at the end of that turn, in order. A line logged off the event loop, or
at WARNING and above, is written at once with everything before it; `flush` (also run at exit)
writes what is pending. The lines themselves are unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TextIO


class TurnBufferedHandler(logging.StreamHandler[TextIO]):
    """A `StreamHandler` that writes the lines of one event-loop turn together."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._pending: list[str] = []
        self._scheduled_on: asyncio.AbstractEventLoop | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Runs under the handler's lock (`Handler.handle`)."""
        try:
            self._pending.append(self.format(record) + self.terminator)
        except Exception:
            self.handleError(record)
            return
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or record.levelno >= logging.WARNING:
            try:
                self.flush()
            except Exception:
                self.handleError(record)
            return
        if self._scheduled_on is not loop:
            self._scheduled_on = loop
            loop.call_soon(self._end_of_turn)

    def _end_of_turn(self) -> None:
        self.acquire()
        try:
            self._scheduled_on = None
            self.flush()
        except (OSError, ValueError):
            pass  # the stream is closed or broken: as `logging.shutdown` does, the lines are dropped
        finally:
            self.release()

    def flush(self) -> None:
        self.acquire()
        try:
            pending, self._pending = self._pending, []
            if pending:
                self.stream.write("".join(pending))
            super().flush()
        finally:
            self.release()
