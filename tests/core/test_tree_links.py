"""Links planted in the session tree are reported and never written, read, moved or deleted through.

Each case is the attack from issue 9 §3 on a real `ServingCore`: a child plants a symbolic link
where a folder of the tree belongs, and the server must not act on whatever the link points at.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from core.asks import DenyingTerminal, Judgment
from core.liveness import heartbeat_path
from core.paths import encode_session_id
from core.serving import ServeEvent, ServingCore
from core.wire import ParsedRequest, RuleDecision
from tests.helpers import request_body, response_path, session_dir, wait_for, write_request

S = "019ff969-c34c-70be-9034-fae19c852932"
SIBLING = "019ff969-c34c-70be-9034-5151b1b1b1b1"


class AllowAll:
    """Recorded authority that approves everything: a link redirecting it would forge approvals."""

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        return Judgment("allow", RuleDecision(surface="bash", pattern="*", origin="global"))


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder` (links as their target, never followed) with its content."""
    seen: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                seen[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                seen[rel] = "dir"
            else:
                seen[rel] = path.read_bytes()
    return seen


async def serve_once(tmp_path: Path, judge: object, control: str | None = None) -> list[ServeEvent]:
    """Serve S for two full scans (and a control request in a sane session, when given), then stop."""
    core = ServingCore(tmp_path / "root", tmp_path / "state", DenyingTerminal(), judge=judge)  # type: ignore[arg-type]
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
                           what="the control request answered")
        await core.rescan_all()
        await core.rescan_all()
    finally:
        core.stop()
        await asyncio.wait_for(task, 5)
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
