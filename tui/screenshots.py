"""`uv run python -m tui.screenshots [OUTDIR]`: SVG screenshots of the real app (default `screenshots/`).

Generated, not drawn, so they cannot drift from the app: the same wiring `pi-authorizer app` uses
(`attended_node`: recorded authority over a small pi config, the history ledger, a `Person`)
on a temporary forwarding root, fed by the simulated children of `tui.demo.children`, run headless.

Deterministic: each run works in a fresh temp folder, and the app is given paths relative to it, so no
shot shows where that folder was; wall time is pinned (`PinnedWallClock`) and moves only when this
script says so, injected into the node (core, history, person) and the app, no module patched;
request ids and `createdAt` are fixed; local time is UTC; the reason editor's cursor does not blink.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Static

from core.clock import SYSTEM_CLOCK, Clock, SystemClock
from core.person import Person
from core.vocabulary.asks import AskKey
from core.wiring import AttendedNode
from tui.app import AppSeams, AuthorizerApp
from tui.commands.app_command import ui_settings
from tui.commands.demo_command import DEMO_SESSION, demo_args
from tui.commands.node import attended_node, take_sessions
from tui.demo.children import SimulatedChild
from tui.demo.scenario import demo_scenarios, legacy
from tui.screens.batch_preview import BatchPreviewScreen
from tui.screens.grant_steps import GrantConfirmScreen
from tui.screens.grants import GrantsScreen
from tui.screens.review import ReviewScreen
from tui.screens.sessions import SessionsScreen
from tui.ui_settings import UiSettings

DEFAULT_OUTDIR = Path(__file__).resolve().parent.parent / "screenshots"
SIZE = (140, 45)
START = 1_790_000_000.0  # wall time when the first child asks (2026-09-21 UTC)
ASK_SPACING_S = 9.0
OTHER_SESSION = "019ff96b-2222-7000-8000-bbbbbbbbbbbb"
SHOTS = (
    "queue.svg",
    "path-ask.svg",
    "no-facts.svg",
    "hostile.svg",
    "help.svg",
    "sessions.svg",
    "deny-with-reason.svg",
    "review.svg",
    "grants.svg",
    "batch-preview.svg",
    "queue-80x24.svg",
)


class PinnedWallClock(SystemClock):
    """Wall time while shooting: fixed, moved only by `advance` (monotonic time and waits are real)."""

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
    return lambda: answer.exists() or any(ask.request.id == request_id for ask in app.person.pending())


class Shooter:
    """Drives one headless run of the app, pressing keys as a person does, and saves screens."""

    def __init__(self, app: AuthorizerApp, pilot: Pilot[int], clock: PinnedWallClock, outdir: Path) -> None:
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
        """Let wall time pass, and show it (the queue's own tick comes only once a second)."""
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
        # New asks join the table in batches: wait for this one's row before moving onto it.
        await self.until(lambda: key in queue.table.ask_keys)
        keys = queue.table.ask_keys
        while queue.selected != key:
            here = keys.index(queue.selected) if queue.selected in keys else 0
            await self.press("j" if here < keys.index(key) else "k")

    async def decide(self, key: AskKey, *presses: str, think_s: float) -> None:
        """Select the ask, look at it for `think_s` of wall time, press the keys until it is gone."""
        await self.select(key)
        self.advance(think_s)
        await self.until_keys_count()
        await self.press(*presses)
        await self.until(lambda: self.app.person.get(key) is None)


def generate(outdir: Path = DEFAULT_OUTDIR) -> list[Path]:
    """Run the app in a fresh temp folder, write every file of `SHOTS` into `outdir`."""
    outdir = outdir.resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    clock = PinnedWallClock(START)
    with (
        tempfile.TemporaryDirectory(prefix="pi-authorizer-screenshots-") as work,
        contextlib.chdir(work),
        utc(),
    ):
        app, root = build_app(Path(), clock)
        asyncio.run(drive(app, root, clock, outdir))
    return [outdir / name for name in SHOTS]


def demo_parts(workdir: Path, clock: Clock = SYSTEM_CLOCK) -> tuple[AttendedNode, UiSettings, Path]:
    """The node and settings as `pi-authorizer app` builds them, on the demo config in `workdir`.

    Also used by `bench.bench_tui`. Returns the forwarding root last.
    """
    options = demo_args(workdir, 0.0)
    node = attended_node(options, clock)
    take_sessions(node, options.sessions)
    return node, ui_settings(options, node.authority), options.forwarding_root


def build_app(workdir: Path, clock: PinnedWallClock) -> tuple[AuthorizerApp, Path]:
    node, settings, root = demo_parts(workdir, clock)
    # The shots show the ask, not the half-second pause of the keys after it appears.
    app = AuthorizerApp(node, dataclasses.replace(settings, input_grace_ms=0), AppSeams(wall=clock.wall))
    return app, root


async def drive(app: AuthorizerApp, root: Path, clock: PinnedWallClock, outdir: Path) -> None:
    """Children ask one at a time; each screen is then reached with the keys a person presses."""
    person = app.person
    kids = children(root, DEMO_SESSION)
    stuck = SimulatedChild(root, OTHER_SESSION, "Explore", "019ff96a-00ff-7000-8000-0000000000ff", "/repo")
    async with app.run_test(size=SIZE) as pilot:
        shooter = Shooter(app, pilot, clock, outdir)
        for index, (agent, scenario) in enumerate(demo_scenarios()):
            kid = kids[agent]
            summary, body = scenario(kid)
            newest = "payload" in body
            rid = f"toolu_shot{index + 1:02d}" if newest else f"{int(START * 1000)}-legacy{index + 1:02d}"
            clock.now = START + index * ASK_SPACING_S
            kid.write(fixed(body, rid, clock.now - 0.2))
            # One at a time, so the queue order (arrival order) is fixed.
            await shooter.until(arrived(app, kid, rid))
            if summary.startswith("read from another worktree"):  # after the 20.7.3 ask, which comes first
                path_ask = next(ask.key for ask in person.pending() if ask.request.id == rid)
                await shooter.select(path_ask)
                shooter.advance(5.0)
                await shooter.shoot("path-ask.svg")
        stuck.write(fixed(legacy(stuck, "bash", "npm test", ["npm test *"]), "toolu_shot99", clock.now))
        shooter.advance(6.0)
        asks = person.pending()
        newer = [ask for ask in asks if ask.has_facts]  # the asks after the 20.7.3 one
        first, second, mcp = newer[0].key, newer[1].key, newer[3].key
        no_facts = next(ask.key for ask in asks if not ask.has_facts)
        await shooter.select(second)
        await shooter.shoot("queue.svg")
        await pilot.resize_terminal(80, 24)
        await shooter.shoot("queue-80x24.svg")
        await pilot.resize_terminal(*SIZE)
        await shooter.press("asterisk", "Y")  # every ask shown marked: the hostile one is left out
        await shooter.until(lambda: isinstance(app.screen, BatchPreviewScreen))
        await shooter.shoot("batch-preview.svg")
        await shooter.press("escape", "asterisk")  # cancel, unmark
        await shooter.select(no_facts)
        await shooter.shoot("no-facts.svg")
        await shooter.select(asks[-1].key)
        await shooter.shoot("hostile.svg")
        await shooter.press("question_mark")
        await shooter.shoot("help.svg")
        await shooter.press("escape", "S")
        await shooter.until(lambda: isinstance(app.screen, SessionsScreen) and len(app.screen.rows) == 2)
        await shooter.shoot("sessions.svg")
        await shooter.press("escape")
        await shooter.decide(first, "y", "y", think_s=4.0)
        await shooter.decide(second, "s", "s", think_s=9.0)
        await shooter.decide(no_facts, "n", "n", think_s=3.0)
        await shooter.select(mcp)
        shooter.advance(7.0)
        await shooter.until_keys_count()
        await shooter.press("r")
        app.screen.query_one("#reason-input", Input).cursor_blink = False
        await shooter.press(*"only after CI passes")
        await shooter.shoot("deny-with-reason.svg")
        await shooter.press("enter")
        await shooter.until(lambda: person.get(mcp) is None)
        await shooter.press("h")
        await shooter.until(
            lambda: (
                isinstance(app.screen, ReviewScreen)
                and "asks" in str(app.screen.query_one("#review-summary", Static).render())
            )
        )
        await shooter.shoot("review.svg")
        await shooter.press("escape")
        await shooter.until(lambda: app.screen is app.queue)
        granted = next(ask.key for ask in person.pending() if Person.serving_grants_of(ask))
        await shooter.select(granted)
        shooter.advance(5.0)
        await shooter.press("w")
        await shooter.until(lambda: isinstance(app.screen, GrantConfirmScreen))
        await shooter.press("y")
        await shooter.until(lambda: person.get(granted) is None)
        shooter.advance(30.0)
        await shooter.press("W")
        await shooter.until(lambda: isinstance(app.screen, GrantsScreen) and bool(app.screen.entries))
        await shooter.shoot("grants.svg")
        await app.quitting.stop_serving()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tui.screenshots", description="Deterministic SVG screenshots of the real app."
    )
    parser.add_argument("outdir", nargs="?", type=Path, default=DEFAULT_OUTDIR, help="default: screenshots/")
    for path in generate(parser.parse_args(argv).outdir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
