"""The sessions a core serves (`core.serving.sessions`), on real folders: taken once, beaten for,
refused folders and unservable inboxes said once each, released for the next authorizer."""

from __future__ import annotations

from pathlib import Path

from core.clock import ManualClock
from core.files import DISK
from core.liveness import heartbeat_path, read_heartbeat
from core.serving.events import ServeEvent
from core.serving.sessions import Sessions
from core.tree import Anchor, UnsafeFolder
from tests.history.support import S


def sessions(tmp_path: Path, events: list[ServeEvent]) -> Sessions:
    root, state = tmp_path / "root", tmp_path / "state"
    trees = Anchor(root, "root"), Anchor(state, "state")
    return Sessions(root, state, *trees, DISK, ManualClock(), events.append)


def test_a_session_is_taken_once_with_its_heartbeat_and_released(tmp_path: Path) -> None:
    events: list[ServeEvent] = []
    roster = sessions(tmp_path, events)
    served, new = roster.add(S)
    assert new and roster.add(S) == (served, False)
    assert roster.by_folder[served.inbox.folder_name] is served
    beat = read_heartbeat(heartbeat_path(tmp_path / "root", S))
    assert beat is not None
    roster.release()
    assert not heartbeat_path(tmp_path / "root", S).exists()
    assert sessions(tmp_path, events).add(S)[1]  # the lock is free for the next one
    assert events == []


def test_unservable_and_refused_folders_are_said_once_each(tmp_path: Path) -> None:
    events: list[ServeEvent] = []
    roster = sessions(tmp_path, events)
    served, _ = roster.add(S)
    for _ in range(2):
        roster.set_unservable(served, "its inbox cannot be listed")
    roster.set_unservable(served, None)
    refused = UnsafeFolder("root/sessions/x/requests", "is a symbolic link (never followed)")
    for _ in range(2):
        roster.report_unsafe(served, "inbox", refused, "not served")
    assert [e.kind for e in events] == ["not_serving", "serving_again", "unsafe_folder"]
    assert events[-1].reason == f"{refused}: not served until it is removed"
    assert served.problems["inbox"] is events[-1]
    roster.clear_unsafe(served, "inbox")
    assert not served.problems
    roster.release()
