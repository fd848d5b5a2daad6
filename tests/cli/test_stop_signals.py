"""`serve` and `run` stop on SIGTERM or SIGINT whatever the event loop's self-pipe holds (stall6).

asyncio hands a signal to its loop as a byte written into the self-pipe, the same socket every
`call_soon_threadsafe` writes a wake-up byte into; while one loop step runs long, the threads' wake-ups
(an executor's finished work, the disk thread's reports) fill it (278 bytes on Linux), and a signal
arriving then is dropped ("Exception ignored when trying to write to the signal wakeup fd:
BlockingIOError"): the serve of campaign5's burst 502 never stopped. Here a real serving core, the
stop signals installed as `serve` does, a loop step that waits for a thousand executor jobs (each
finishing with a wake-up) and the signal raised in that step.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
from pathlib import Path

import pytest

from core.serving import ServingCore
from core.vocabulary.asks import DenyingArbiter
from tui.commands.node import install_stop_signals

#: Executor jobs finished while the loop is busy: well past what the self-pipe holds.
WAKE_UPS = 1000
#: A bound for "never": an idle loop hands a signal to its handler at once.
STOPPED_WITHIN_S = 10.0


def _stops_on(sig: signal.Signals, tmp_path: Path) -> bool:
    """Whether a core run with `install_stop_signals` ends after `sig` arrives on a full self-pipe."""
    root = tmp_path / "root"
    root.mkdir()

    async def scenario() -> bool:
        loop = asyncio.get_running_loop()
        core = ServingCore(root, tmp_path / "state", DenyingArbiter())
        install_stop_signals(core)
        running = asyncio.ensure_future(core.run())
        await asyncio.sleep(0)  # the core's tasks started
        waited: list[asyncio.Future[int]] = []

        def long_step() -> None:  # one loop step while the threads finish (each a wake-up byte)
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                jobs = [pool.submit(int) for _ in range(WAKE_UPS)]
                waited.extend(asyncio.wrap_future(job) for job in jobs)
                concurrent.futures.wait(jobs)
            signal.raise_signal(sig)

        loop.call_soon(long_step)
        try:
            await asyncio.wait_for(asyncio.shield(running), STOPPED_WITHIN_S)
        except TimeoutError:
            core.stop()
            await running
            return False
        finally:
            await asyncio.gather(*waited)
        return True

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return asyncio.run(scenario())
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_arriving_while_the_self_pipe_is_full_stops_serving(
    sig: signal.Signals, tmp_path: Path
) -> None:
    assert _stops_on(sig, tmp_path), f"{sig.name} was lost: serving did not stop"
