"""A wait on the system clock that is cancelled as its event is set ends cancelled. `asyncio.wait_for`
on Python 3.11 returns the event's result instead when both land in one step, swallowing the
cancellation: a stop (which sets the stop event and cancels the tasks) then let the safety rescan's
pause return, and a whole rescan of an 8,000-file backlog ran during the shutdown (20 s on a full
history)."""

from __future__ import annotations

import asyncio

import pytest

from core.clock import SystemClock


@pytest.mark.parametrize("steps", [0, 1, 2, 3])
async def test_a_wait_cancelled_as_its_event_is_set_ends_cancelled(steps: int) -> None:
    event = asyncio.Event()
    waiting = asyncio.ensure_future(SystemClock().wait(event, 60))
    await asyncio.sleep(0)  # it waits
    event.set()
    for _ in range(steps):  # the event's own waiter done, the wait not resumed yet (or resumed)
        await asyncio.sleep(0)
    waiting.cancel()
    if waiting.done():  # it had returned before the cancel: nothing to swallow
        assert waiting.result() is True
        return
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_wait_says_whether_its_event_was_set() -> None:
    event = asyncio.Event()
    assert await SystemClock().wait(event, 0.001) is False
    event.set()
    assert await SystemClock().wait(event, 60) is True
