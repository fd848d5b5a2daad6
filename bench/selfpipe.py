"""The event loop's self-pipe in a real `serve` (stall6): how many wake-ups its threads write between
two reads of it, who writes them, and a real SIGTERM raised the moment it is full.

asyncio's loop is woken from other threads by a byte written into a socketpair (`call_soon_threadsafe`,
each executor job done), and learns of a signal from the signal number written into the same socket;
a Linux socketpair takes 278 one-byte writes, and a signal whose byte finds it full is lost. Used by
`campaign_burst --selfpipe`, which copies this file as `sitecustomize.py` into a folder on serve's
`PYTHONPATH`, with `SELFPIPE_OUT` naming the folder for the notes (`<pid>.txt`: each new peak in
steps of 25, the writers by thread and job past 100 wake-ups; `<pid>.stacks`: `py-spy dump` 4 s after
the signal, when `$PY_SPY` names it). `SELFPIPE_TERM=1`: SIGTERM is raised on the writing thread
(its C handler runs there at once) the first time a wake-up finds the pipe full, as a stop sent then
would arrive. Acts only when `SELFPIPE_OUT` is set, and only in a process whose command says `serve`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType

#: One-byte writes a Linux socketpair takes before `EAGAIN` (measured: 278).
FULL = 278
#: From this many wake-ups without a read, each writer is counted (by thread and job).
COUNTED_FROM = 100


def _work_of(frame: FrameType | None) -> str:
    """The job an executor thread finished (its `_WorkItem.fn`, unwrapped), from the writer's frames."""
    while frame is not None:
        item = frame.f_locals.get("self") if frame.f_code.co_name == "run" else None
        fn = getattr(item, "fn", None)
        if fn is not None:
            fn = getattr(fn, "func", fn)
            return str(getattr(fn, "__qualname__", fn))
        frame = frame.f_back
    return "?"


class CountingLoop(asyncio.SelectorEventLoop):
    """The selector loop, its self-pipe writes counted (and tried by hand, to see `EAGAIN`)."""

    pending = 0
    peak = 0
    refused = 0
    termed = False
    writers: dict[str, int] = {}  # noqa: RUF012 - one loop per serve process

    def _write_to_self(self) -> None:
        cls = CountingLoop
        cls.pending += 1
        if cls.pending >= COUNTED_FROM:
            key = f"{threading.current_thread().name.rstrip('0123456789_')}: {_work_of(sys._getframe(1))}"
            cls.writers[key] = cls.writers.get(key, 0) + 1
        csock = getattr(self, "_csock", None)
        full = False
        if csock is not None:
            try:
                csock.send(b"\0")
            except BlockingIOError:
                full = True
            except OSError:
                pass
        if full:
            cls.refused += 1
            if os.environ.get("SELFPIPE_TERM") and not cls.termed:
                cls.termed = True
                self._note("SIGTERM raised with the self-pipe full")
                signal.raise_signal(signal.SIGTERM)
                threading.Thread(target=_dump_later, daemon=True).start()
        if cls.pending > cls.peak:
            cls.peak = cls.pending
            if cls.peak % 25 == 0 or cls.peak == FULL:
                self._note(f"peak {cls.peak} wake-ups between two reads, {cls.refused} refused")

    def _read_from_self(self) -> None:
        super()._read_from_self()  # type: ignore[misc]
        CountingLoop.pending = 0

    def _handle_signal(self, sig: int) -> None:
        self._note(f"signal {sig} reached the loop through its self-pipe")
        super()._handle_signal(sig)  # type: ignore[misc]

    def _note(self, what: str) -> None:
        lines = [f"{time.time():.3f} {what}"]
        if CountingLoop.peak >= FULL and what.startswith("peak"):
            top = sorted(CountingLoop.writers.items(), key=lambda kv: -kv[1])[:6]
            lines += [f"    {n} {key}" for key, n in top]
        with open(os.path.join(os.environ["SELFPIPE_OUT"], f"{os.getpid()}.txt"), "a") as out:
            out.write("\n".join(lines) + "\n")


def _dump_later() -> None:
    """What serve does 4 s after the signal (`py-spy dump`, when `$PY_SPY` names it)."""
    spy = os.environ.get("PY_SPY")
    if spy is None:
        return
    time.sleep(4)
    dump = subprocess.run([spy, "dump", "--pid", str(os.getpid())], capture_output=True, text=True,
                          check=False)
    with open(os.path.join(os.environ["SELFPIPE_OUT"], f"{os.getpid()}.stacks"), "w") as out:
        out.write(dump.stdout + dump.stderr)


class CountingPolicy(asyncio.DefaultEventLoopPolicy):
    _loop_factory = CountingLoop


if os.environ.get("SELFPIPE_OUT") and "serve" in getattr(sys, "orig_argv", []):
    asyncio.set_event_loop_policy(CountingPolicy())
