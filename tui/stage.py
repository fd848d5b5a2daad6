"""The stage `tui.screenshots` shoots on: a wall clock that moves only when told, and a shooter that
presses keys as a person does and saves what the screen shows."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from core.clock import SystemClock
from core.serving.asks import AskKey
from tui.app import AuthorizerApp
from tui.demo.children import SimulatedChild
from tui.demo.scenario import demo_scenarios


class StageClock(SystemClock):
    """The process's wall time while shooting: fixed, moved only by `advance` (waits are real)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now

    def monotonic(self) -> float:
        """Real: Textual measures its own timers and key grace on it."""
        return time.monotonic()

    def advance(self, seconds: float) -> None:
        self.now += seconds


@contextlib.contextmanager
def utc() -> Iterator[None]:
    """Local time is UTC while shooting (times are shown as local time), restored afterwards."""
    tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = tz
        time.tzset()


def children(root: Path, target: str) -> dict[str, SimulatedChild]:
    """One child per demo agent, each in its own worktree, with fixed session ids."""
    agents = dict.fromkeys(agent for agent, _ in demo_scenarios())
    return {
        agent: SimulatedChild(
            root, target, agent, f"019ff96a-{i + 1:04x}-7000-8000-{i + 1:012x}", f"/worktrees/issue-{40 + i}"
        )
        for i, agent in enumerate(agents)
    }


def fixed(body: dict[str, Any], request_id: str, created_s: float) -> dict[str, Any]:
    """The scenario's body with a fixed id and `createdAt` (the builders use the real clock)."""
    return {**body, "id": request_id, "createdAt": int(created_s * 1000)}


def arrived(app: AuthorizerApp, child: SimulatedChild, request_id: str) -> Callable[[], bool]:
    """The ask is in the queue, or this node's rules have already answered it."""
    answer = child.folder / "responses" / f"{request_id}.json"
    return lambda: answer.exists() or any(ask.request.id == request_id for ask in app.human.pending())


class Shooter:
    """Drives one headless run of the app, pressing keys as a person does, and saves screens."""

    def __init__(self, app: AuthorizerApp, pilot: Pilot[int], clock: StageClock, outdir: Path) -> None:
        self.app, self.pilot, self.clock, self.outdir = app, pilot, clock, outdir

    async def until(self, predicate: Callable[[], bool], within: float = 10.0) -> None:
        deadline = time.monotonic() + within
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError("the app did not reach the state to shoot")
            await self.pilot.pause(0.02)

    async def press(self, *keys: str) -> None:
        await self.pilot.press(*keys)

    async def until_keys_count(self) -> None:
        """Decision keys count only once the ask is painted (`tui.keysafety`): wait for that."""
        await self.until(self.app.safety.accepting)

    def advance(self, seconds: float) -> None:
        """Let stage time pass, and show it (the queue's own tick comes only once a second)."""
        self.clock.advance(seconds)
        self.app.queue.refresh_queue()

    async def shoot(self, name: str) -> None:
        await self.pilot.pause(0.05)
        await self.pilot.wait_for_scheduled_animations()
        self.app.clear_notifications()
        await self.pilot.pause()
        self.app.save_screenshot(name, str(self.outdir))

    async def select(self, key: AskKey) -> None:
        """Move the queue cursor with j / k onto the ask `key`."""
        queue = self.app.queue
        keys = queue.table.ask_keys
        while queue.selected != key:
            here = keys.index(queue.selected) if queue.selected in keys else 0
            await self.press("j" if here < keys.index(key) else "k")

    async def decide(self, key: AskKey, *presses: str, think_s: float) -> None:
        """Select the ask, look at it for `think_s` of stage time, press the keys until it is gone."""
        await self.select(key)
        self.advance(think_s)
        await self.until_keys_count()
        await self.press(*presses)
        await self.until(lambda: self.app.human.get(key) is None)
