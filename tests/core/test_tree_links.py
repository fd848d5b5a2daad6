"""Links planted in the session tree are reported and never written, read, moved or deleted through.

Each case is the attack from issue 9 §3 on a real `ServingCore`: a child plants a symbolic link
where a folder of the tree belongs, and the server must not act on whatever the link points at.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.disk.paths import encode_session_id
from core.forwarding.liveness import heartbeat_path
from core.serving import ServingCore
from core.testing import AllowAll
from core.vocabulary.asks import DenyingArbiter
from core.vocabulary.events import ServeEvent
from tests.core.support import (
    CONTROL,
    FOLDER,
    ROOT_LEVELS,
    STATE_LEVELS,
    plant_bait,
    plant_link,
    session_with_requests,
    snapshot,
)
from tests.helpers import request_body, response_path, session_dir, wait_for, write_request
from tests.history.support import S

SIBLING = "019ff969-c34c-70be-9034-5151b1b1b1b1"






async def serve_once(tmp_path: Path, judge: object, control: str | None = None) -> list[ServeEvent]:
    """Serve S for two full scans (and a control request in a sane session, when given), then stop."""
    core = ServingCore(tmp_path / "root", tmp_path / "state", DenyingArbiter(), judge=judge)  # type: ignore[arg-type]
    events: list[ServeEvent] = []
    core.subscribe(events.append)
    core.add_session(S)
    if control is not None:
        core.add_session(control)
    task = asyncio.create_task(core.run())
    try:
        if control is not None:
            write_request(tmp_path / "root", control, "control")
            await wait_for(lambda: response_path(tmp_path / "root", control, "control").exists(),
                           within=30, what="the control request answered")
        await core.rescan_all()
        await core.rescan_all()
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)
    return events


async def test_linked_responses_folder_never_receives_an_approval(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_request(root, SIBLING, "sibling-ask")
    write_request(root, S, "mine")
    responses = session_dir(root, S) / "responses"
    responses.rmdir()
    responses.symlink_to(session_dir(root, SIBLING) / "responses")
    events = await serve_once(tmp_path, AllowAll(), control="019ff969-c34c-70be-9034-c0c0c0c0c0c0")
    assert os.listdir(session_dir(root, SIBLING) / "responses") == []
    assert (session_dir(root, S) / "requests" / "mine.json").exists()
    reported = [e for e in events if e.kind == "unsafe_folder"]
    assert reported and "responses" in str(reported[0].reason) and "symbolic link" in str(reported[0].reason)


async def test_linked_session_folder_is_not_served(tmp_path: Path) -> None:
    root = tmp_path / "root"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "requests").mkdir(parents=True)
    (elsewhere / "responses").mkdir()
    (elsewhere / "requests" / "x.json").write_text(json.dumps(request_body("x", S)))
    (elsewhere / "requests" / "junk.json").write_text("not json")
    (root / "sessions").mkdir(parents=True)
    session_dir(root, S).symlink_to(elsewhere)
    before = snapshot(elsewhere)
    events = await serve_once(tmp_path, AllowAll())
    assert snapshot(elsewhere) == before
    assert any(e.kind == "unsafe_folder" and encode_session_id(S) in str(e.reason) for e in events)


async def test_linked_requests_folder_is_never_drained_into_quarantine(tmp_path: Path) -> None:
    root = tmp_path / "root"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "settings.json").write_text('{"precious": true}')
    (foreign / "other.json").write_text(json.dumps(request_body("other", S)))
    session_dir(root, S).mkdir(parents=True)
    (session_dir(root, S) / "requests").symlink_to(foreign)
    before = snapshot(foreign)
    events = await serve_once(tmp_path, AllowAll())
    assert snapshot(foreign) == before
    assert not (session_dir(root, S) / "responses" / "other.json").exists()
    quarantine = tmp_path / "state" / "quarantine"
    assert not quarantine.exists() or snapshot(quarantine) == {}
    assert any(e.kind == "unsafe_folder" and "requests" in str(e.reason) for e in events)


async def test_linked_serving_folder_is_never_overwritten_or_deleted(tmp_path: Path) -> None:
    root = tmp_path / "root"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    victim = foreign / heartbeat_path(root, S).name
    victim.write_bytes(b"someone else's file")
    root.mkdir()
    (root / "serving").symlink_to(foreign)
    events = await serve_once(tmp_path, AllowAll())
    assert victim.read_bytes() == b"someone else's file"
    assert sorted(os.listdir(foreign)) == [victim.name]
    assert any(e.kind == "unsafe_folder" and "serving" in str(e.reason) for e in events)


# -- a link at every level of the tree -------------------------------------------------------------









async def test_a_link_at_each_level_of_the_forwarding_root_is_reported_and_never_acted_through(
    tmp_path: Path,
) -> None:
    for level, parts in ROOT_LEVELS.items():
        base = tmp_path / level.replace(" ", "-")
        foreign = base / "foreign"
        plant_bait(foreign)
        session_with_requests(base / "root")
        plant_link(base, parts, foreign)
        before = snapshot(foreign)
        # With `sessions/` itself linked no session can be served; otherwise a sane one still is.
        events = await serve_once(base, AllowAll(), control=None if level == "sessions" else CONTROL)
        assert snapshot(foreign) == before, level
        reported = [e for e in events if e.kind == "unsafe_folder"]
        assert reported and "symbolic link" in str(reported[0].reason), level
        assert parts[-1] in str(reported[0].reason), level
        quarantined = base / "state" / "quarantine"
        for path in quarantined.rglob("*") if quarantined.exists() else []:
            assert not path.name.endswith("bait.json"), (level, path)


async def test_a_link_in_the_state_dir_is_never_written_through(tmp_path: Path) -> None:
    for level, parts in STATE_LEVELS.items():
        base = tmp_path / level.replace(" ", "-")
        foreign = base / "foreign"
        plant_bait(foreign)
        session_with_requests(base / "root")
        plant_link(base, parts, foreign)
        before = snapshot(foreign)
        events = await serve_once_settled(base)
        assert snapshot(foreign) == before, level
        # The unusable file was answered but stays in place (not quarantined through the link).
        rejected = [e for e in events if e.kind == "quarantined"]
        assert rejected and (session_dir(base / "root", S) / "requests" / "junk.json").exists(), level
        reported = [e for e in events if e.kind == "unsafe_folder"]
        assert reported and "left in place" in str(reported[0].reason), level


async def serve_once_settled(base: Path) -> list[ServeEvent]:
    core = ServingCore(base / "root", base / "state", DenyingArbiter())
    events: list[ServeEvent] = []
    core.subscribe(events.append)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        for answer in (response_path(base / "root", S, "junk"), response_path(base / "root", S, "mine")):
            await wait_for(answer.exists, within=30, what=f"{answer.name} written")
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)
    return events


def test_a_linked_lock_folder_or_lock_file_refuses_the_session(tmp_path: Path) -> None:
    import pytest

    from core.disk.tree import UnsafeFolder

    foreign = tmp_path / "foreign"
    plant_bait(foreign)
    before = snapshot(foreign)
    (tmp_path / "a" / "state").mkdir(parents=True)
    (tmp_path / "a" / "state" / "locks").symlink_to(foreign)
    with pytest.raises(UnsafeFolder, match="locks is a symbolic link"):
        ServingCore(tmp_path / "a" / "root", tmp_path / "a" / "state", DenyingArbiter()).add_session(S)
    (tmp_path / "b" / "state" / "locks").mkdir(parents=True)
    (tmp_path / "b" / "state" / "locks" / f"{FOLDER}.lock").symlink_to(foreign / f"{FOLDER}.lock")
    with pytest.raises(UnsafeFolder, match="is a symbolic link"):
        ServingCore(tmp_path / "b" / "root", tmp_path / "b" / "state", DenyingArbiter()).add_session(S)
    assert snapshot(foreign) == before
    assert not (tmp_path / "a" / "root" / "serving").exists()


async def test_a_linked_root_is_served_where_it_resolved(tmp_path: Path) -> None:
    """The configured root may itself be a link (the person's choice): it is followed once, at start."""
    real = tmp_path / "data" / "forwarding"
    real.mkdir(parents=True)
    (tmp_path / "root").symlink_to(real)
    write_request(tmp_path / "root", S, "through-root-link")
    core = ServingCore(tmp_path / "root", tmp_path / "state", DenyingArbiter(), judge=AllowAll())
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        await wait_for(lambda: response_path(real, S, "through-root-link").exists(), within=30,
                       what="answered")
    finally:
        core.stop()
        await asyncio.wait_for(task, 30)
    assert core.tree.real == str(real)


def test_a_folder_refused_before_an_observer_subscribed_is_reported_to_it(tmp_path: Path) -> None:
    """The app subscribes after `add_session`: a `serving/` link found by the first beat still reaches it."""
    (tmp_path / "root").mkdir()
    (tmp_path / "foreign").mkdir()
    (tmp_path / "root" / "serving").symlink_to(tmp_path / "foreign")
    core = ServingCore(tmp_path / "root", tmp_path / "state", DenyingArbiter())
    core.add_session(S)
    events: list[ServeEvent] = []
    core.subscribe(events.append)
    assert [e.kind for e in events] == ["unsafe_folder"]
    assert "serving is a symbolic link" in str(events[0].reason)
    assert os.listdir(tmp_path / "foreign") == []
    core.served[S].lock.release()


async def test_serving_leaks_no_descriptors(tmp_path: Path) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    root = tmp_path / "root"
    write_request(root, S, "warm-up")
    await serve_once(tmp_path, AllowAll())
    before = open_fds()
    for index in range(20):
        write_request(root, S, f"r{index}")
        (session_dir(root, S) / "requests" / f"junk{index}.json").write_text("{")
    await serve_once(tmp_path, AllowAll())
    assert len(os.listdir(session_dir(root, S) / "responses")) == 41
    assert open_fds() <= before


# --------------------------------------------------------------------------------------------------
# Property: links planted at random levels of the tree never let a real server act outside its folders.
#
# For each example a fresh forwarding root and state dir get a served session with requests (valid
# and unusable) and a sane sibling session; links are planted at random levels, pointing at bait
# outside the tree or at the sibling's own folders. Whatever the combination, serving must not
# write, move or delete anything the links point at, must report the link, and must go on serving
# the sibling.


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
