"""Property: links planted at random levels of the tree never let a real server act outside its folders.

For each example a fresh forwarding root and state dir get a served session with requests (valid
and unusable) and a sane sibling session; links are planted at random levels, pointing at bait
outside the tree or at the sibling's own folders. Whatever the combination, serving must not
write, move or delete anything the links point at, must report the link, and must go on serving
the sibling.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.serving import ServeEvent, ServingCore
from core.serving.asks import DenyingArbiter
from core.testing import AllowAll
from tests.core.support import (
    CONTROL,
    ROOT_LEVELS,
    STATE_LEVELS,
    plant_bait,
    plant_link,
    session_with_requests,
    snapshot,
)
from tests.helpers import response_path, session_dir, wait_for, write_request

LEVELS = {**ROOT_LEVELS, **STATE_LEVELS}
TARGETS = ("bait", "sibling folder", "sibling requests", "sibling responses")


async def serve(base: Path, sibling_served: bool) -> list[ServeEvent]:
    core = ServingCore(base / "root", base / "state", DenyingArbiter(), judge=AllowAll())
    events: list[ServeEvent] = []
    core.subscribe(events.append)
    core.add_session(CONTROL)
    core.add_session("019ff969-c34c-70be-9034-fae19c852932")
    task = asyncio.create_task(core.run())
    try:
        await core.rescan_all()
        if sibling_served:
            write_request(base / "root", CONTROL, "control-after")
            await wait_for(lambda: response_path(base / "root", CONTROL, "control-after").exists(),
                           within=30, what="the sibling still served")
        await core.rescan_all()
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)
    return events


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    planted=st.dictionaries(st.sampled_from(sorted(LEVELS)), st.sampled_from(TARGETS), min_size=1,
                            max_size=3),
    valid=st.integers(min_value=1, max_value=3),
)
def test_links_at_random_levels_never_let_serving_act_outside_the_session(
    planted: dict[str, str], valid: int
) -> None:
    base = Path(tempfile.mkdtemp(prefix="tree-campaign-"))
    try:
        root = base / "root"
        bait = base / "bait"
        plant_bait(bait)
        write_request(root, CONTROL, "control-before")
        sibling = session_dir(root, CONTROL)
        for index in range(valid):
            write_request(root, "019ff969-c34c-70be-9034-fae19c852932", f"mine-{index}")
        session_with_requests(root)
        targets = {"bait": bait, "sibling folder": sibling, "sibling requests": sibling / "requests",
                   "sibling responses": sibling / "responses"}
        # Deepest first, so a shallower link replaces a folder holding a deeper one.
        for level in sorted(planted, key=lambda name: -len(LEVELS[name])):
            plant_link(base, LEVELS[level], targets[planted[level]])
        before_bait = snapshot(bait)
        sibling_linked = "sessions" in planted
        events = asyncio.run(serve(base, sibling_served=not sibling_linked))

        assert snapshot(bait) == before_bait
        if not sibling_linked:
            # The sibling's folders hold only the sibling's own traffic, whatever points at them.
            answered = sorted(p.name for p in (sibling / "responses").iterdir())
            assert answered == ["control-after.json", "control-before.json"], answered
            assert not [p for p in (sibling / "requests").iterdir() if p.name.endswith(".json")]
        assert any(e.kind == "unsafe_folder" for e in events), planted
        for event in events:
            if event.kind == "answered":
                assert event.key.session_id == CONTROL or not (set(planted) & {"responses", "session folder"})
        quarantine = base / "state" / "quarantine"
        if quarantine.is_dir() and not quarantine.is_symlink():
            for path in quarantine.rglob("*"):
                assert "bait" not in path.name and "control" not in path.name, path
    finally:
        shutil.rmtree(base, ignore_errors=True)
