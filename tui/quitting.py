"""How the app ends: `q`, a closed terminal (SIGHUP) or SIGTERM, and the forced exit when a graceful
quit hangs. Each stops the core first (heartbeats removed, locks released, pending asks left in
their inboxes for the next authorizer, history committed).

`Quitting` is a part the app holds: it knows the core and the worker that runs it, installs the
signal handlers, and is the one way out (`quit_now`, `stop_serving`, the forced exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import termios
import threading
from collections.abc import Callable

from textual.app import App
from textual.worker import Worker

from core.serving import ServingCore

#: After SIGHUP/SIGTERM, how long the graceful quit may take before the app exits without it.
FORCED_EXIT_S = 0.9
#: At a forced exit, how long to wait for a heartbeat being written before releasing anyway.
FORCED_RELEASE_WAIT_S = 0.5


#: Leave the alternate screen, show the cursor, stop mouse reporting (what Textual's exit undoes).
_RESTORE_SEQUENCE = b"\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l"


def restore_terminal_modes() -> None:
    """Best effort, from any thread, when Textual's own exit did not run: a usable shell prompt."""
    with contextlib.suppress(OSError):
        os.set_blocking(1, False)
        os.write(1, _RESTORE_SEQUENCE)
    with contextlib.suppress(OSError, termios.error):
        attrs = termios.tcgetattr(0)
        attrs[3] |= termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN
        termios.tcsetattr(0, termios.TCSANOW, attrs)


def detach_from_terminal() -> None:
    """The terminal is gone: point stdin/stdout/stderr at /dev/null so no read or write blocks or fails."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)


class Quitting:
    """The quit paths of one app and the core it serves."""

    def __init__(self, app: App[int], core: ServingCore) -> None:
        self.app = app
        self.core = core
        #: The worker running `core.run()` (the app starts it on mount).
        self.core_worker: Worker[None] | None = None
        #: The app is stopping the core: its end is no failure.
        self.stopping = False
        self._forced_exit: threading.Timer | None = None
        #: Taken by the one thread that runs the exit cleanups and ends the process.
        self._exiting = threading.Lock()
        #: Run (from another thread) when a signal's graceful quit times out, before `os._exit`.
        self.forced_exit_cleanups: list[Callable[[], None]] = []

    def install_signal_handlers(self) -> None:
        """A closed terminal (SIGHUP) or a kill (SIGTERM) still removes heartbeats and locks.

        Plain `signal.signal` handlers, not the loop's: they run in the main thread even while the
        event loop is stuck writing to a terminal that is gone (Textual's output queue is bounded
        and its writer thread dies on the first EIO), which is where a loop handler never runs.
        """
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to install
                signal.signal(sig, lambda signum, _frame: self._signalled(signum, loop))

    def _signalled(self, signum: int, loop: asyncio.AbstractEventLoop) -> None:
        if signum == signal.SIGHUP:
            detach_from_terminal()
        if self._forced_exit is None:
            self._forced_exit = threading.Timer(
                FORCED_EXIT_S, self._force_exit, (128 + signum, signum != signal.SIGHUP)
            )
            self._forced_exit.daemon = True
            self._forced_exit.start()
        quit_now = self._quit_after_hangup() if signum == signal.SIGHUP else self.quit_now()
        loop.call_soon_threadsafe(
            lambda: self.app.run_worker(quit_now, name="quit-on-signal", exclusive=True, group="quit")
        )

    def exit_process_if_signalled(self) -> None:
        """After a signal, once the command has done its printing: run the forced-exit cleanups and
        end the process now (exclusive with the watchdog's exit). Tearing down the interpreter (every
        Textual object) took up to a second on a busy machine, and the daemon watchdog cannot act
        during that teardown."""
        if self._forced_exit is None:
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        logging.shutdown()
        self._force_exit(0)

    async def _quit_after_hangup(self) -> None:
        """No terminal is left to restore: stop serving (heartbeats, locks, history), clean up, exit."""
        await self.stop_serving()
        self._force_exit(0)

    def _force_exit(self, code: int, restore_terminal: bool = False) -> None:
        """The graceful quit did not finish in time: do its essential part from this thread, exit.

        One thread at a time (the watchdog's and the quit's may both get here): the one that comes
        second waits for the exit instead of ending the process in the middle of the cleanups."""
        self._exiting.acquire()  # never released: this thread ends the process
        if restore_terminal:
            restore_terminal_modes()
        with contextlib.suppress(Exception):
            self.core.served.release(wait_s=FORCED_RELEASE_WAIT_S)
        for cleanup in self.forced_exit_cleanups:
            with contextlib.suppress(Exception):
                cleanup()
        os._exit(code)

    async def stop_serving(self) -> None:
        """Stop the core and wait for it: heartbeats removed, locks released, requests left."""
        self.stopping = True
        self.core.stop()
        worker = self.core_worker
        if worker is not None:
            with contextlib.suppress(Exception):  # a failure was already reported by the app
                await worker.wait()

    async def quit_now(self) -> None:
        await self.stop_serving()
        self.app.exit(0)
