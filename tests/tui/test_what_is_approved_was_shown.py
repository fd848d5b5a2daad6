"""Issue 20's property: for random sequences of asks arriving, withdrawing, being rewritten under the
same id, and key presses (single decisions, marks, batches), every approval a child receives is of
bytes that were on screen when the key that committed it was pressed.

Real request files, the real serving core and the real app driven by Pilot. After each file change
the test waits until the person's queue holds exactly the files on disk (so what is on screen at a
key press is known exactly); then, for each key, the asks on screen are noted (the queue's detail, or
every ask the open batch preview lists) and every approval the key caused must be of one of them
(by identity, so of their bytes: the core publishes a person's decision only while the request file
still holds the bytes decided), and every approved response on disk must match such a decision.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.vocabulary.asks import Ask
from tests.tui.support import (
    Rig,
    make_rig,
    read_response,
    request_body,
    requests_dir,
    settle,
    wait_for,
    write_request,
)
from tui.screens.batch_preview import BatchPreviewScreen
from tui.ui_settings import UiSettings

pytestmark = pytest.mark.timeout(600)  # a hang guard for the whole campaign, not a speed check

IDS = ("p-0", "p-1", "p-2", "p-3")
VALUES = ("ls", "pwd", "rm -rf ~", "git push --force", "cat .env")
KEYS = ("y", "n", "Y", "N", "space", "asterisk", "j", "k", "escape")

Step = tuple[str, ...]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.sampled_from(IDS), st.sampled_from(VALUES)),
        st.tuples(st.just("withdraw"), st.sampled_from(IDS)),
        st.tuples(st.just("rewrite"), st.sampled_from(IDS), st.sampled_from(VALUES)),
        st.tuples(st.just("key"), st.sampled_from(KEYS)),
        st.tuples(st.just("key"), st.sampled_from(("y", "Y"))),  # approvals more often
    ),
    min_size=4,
    max_size=12,
)


def on_disk(rig: Rig) -> dict[str, bytes]:
    folder = requests_dir(rig.root)
    found: dict[str, bytes] = {}
    if folder.exists():
        for path in folder.glob("*.json"):
            try:
                found[path.stem] = path.read_bytes()
            except FileNotFoundError:
                continue
    return found


def queue_matches_disk(rig: Rig) -> bool:
    """The person's queue lists exactly the request files there are (a file rewritten in place may
    still be listed with the bytes first read: the core checks the bytes when a decision is written)."""
    files = set(on_disk(rig))
    pending = {a.key.name.removesuffix(".json") for a in rig.person.pending()}
    queue = rig.app.queue
    return pending == files and queue.ready and queue.table.row_count == len(files)


def on_screen(rig: Rig) -> list[Ask]:
    """The asks a committing key could be about, as they are on screen now."""
    screen = rig.app.screen
    if isinstance(screen, BatchPreviewScreen):
        return list(screen.included)
    queue = rig.app.queue
    if screen is queue:
        shown = queue.shown_ask()
        return [shown] if shown is not None else []
    return []


async def campaign(plan: list[Step], tmp: Path) -> None:
    rig = make_rig(tmp, UiSettings(input_grace_ms=0, double_press=False))
    created = time.time() * 1000 - 5000
    shown_at_approval: dict[int, list[Ask]] = {}
    async with rig.app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: rig.app.queue.ready)
        for step in plan:
            kind = step[0]
            folder = requests_dir(rig.root)
            if kind == "arrive" and not (folder / f"{step[1]}.json").exists():
                created += 1
                write_request(rig.root, request_body(step[1], value=step[2], created_at=created))
            elif kind == "withdraw":
                (folder / f"{step[1]}.json").unlink(missing_ok=True)
            elif kind == "rewrite" and (folder / f"{step[1]}.json").exists():
                # The child gives up and writes another ask under the same id, at once.
                (folder / f"{step[1]}.json").unlink()
                created += 1
                write_request(rig.root, request_body(step[1], value=step[2], created_at=created))
            elif kind == "key":
                before = len(rig.decided)
                visible = on_screen(rig)
                await pilot.press(step[1])
                await settle(pilot)
                await wait_for(pilot, lambda: not rig.app.queue._busy)
                for index, decided in enumerate(rig.decided[before:], before):
                    if decided.response.approved:
                        shown_at_approval[index] = visible
            await wait_for(pilot, lambda: queue_matches_disk(rig), within=15)
            await settle(pilot)
        for index, decided in enumerate(rig.decided):
            if not decided.response.approved:
                continue
            visible = shown_at_approval.get(index, [])
            assert any(decided.ask is ask for ask in visible), (
                f"approved {decided.ask.request.value!r} ({decided.ask.key.name}), "
                f"on screen: {[a.request.value for a in visible]}")
        # Every approval a child received is one of those decisions, of the bytes decided.
        approved_raw = {(d.ask.key.name, d.ask.parsed.raw) for d in rig.decided if d.response.approved}
        for rid in IDS:
            body = read_response(rig.root, rid)
            if body is not None and body.get("approved"):
                assert any(name == f"{rid}.json" for name, _ in approved_raw), rid


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps)
def test_every_approval_is_of_bytes_on_screen_at_the_commit(plan: list[Step]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(campaign(plan, Path(tmp)))


def test_the_campaign_sees_a_rewrite_under_an_open_preview() -> None:
    """One fixed plan the property must hold on: a preview opened, one listed ask rewritten as
    `rm -rf ~` under its id, then `y`."""
    plan: list[Step] = [("arrive", "p-0", "ls"), ("arrive", "p-1", "pwd"), ("key", "asterisk"),
                        ("key", "Y"), ("rewrite", "p-0", "rm -rf ~"), ("key", "y"), ("key", "escape")]
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(campaign(plan, Path(tmp)))
    # Withdrawn, seen gone, then a new file under the same id, all while the preview is open.
    plan = [("arrive", "p-0", "ls"), ("arrive", "p-1", "pwd"), ("key", "asterisk"), ("key", "Y"),
            ("withdraw", "p-0"), ("arrive", "p-0", "rm -rf ~"), ("key", "y"), ("key", "escape"),
            ("key", "y")]
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(campaign(plan, Path(tmp)))

