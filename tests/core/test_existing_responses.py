"""`existing_responses` finds the same responses whether a watch of `responses/` vouches for the folder
(`core.forwarding.outbox`, registered as the serving watcher registers it) or the folder is listed or
looked at name by name (the slow path), and a trip's ids are told safe all at once as one by one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import platform
from core.disk.paths import is_safe_request_id
from core.forwarding import outbox
from core.forwarding.inbox import SessionInbox
from core.forwarding.outbox import Outboxes
from core.serving.intake import existing_responses, response_names
from tests.helpers import needs_inotify, session_dir, write_request
from tests.history.support import S

SOME = ["a", "b", "c", "r.1", "..", ".", "", "a/b", "/", "x" * 300, "é", "a\nb"]
IDS = st.lists(st.one_of(st.sampled_from(SOME), st.text(max_size=12)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(ids=IDS)
def test_a_trips_ids_told_safe_at_once_as_one_by_one(ids: list[str]) -> None:
    assert response_names(ids) == [f"{i}.json" for i in ids if is_safe_request_id(i)]


def tell(call: Callable[..., object], *args: object) -> None:
    call(*args)


@needs_inotify
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(planted=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]),
                                  st.sampled_from(["file", "link", "dir"])), max_size=6),
       ids=st.lists(st.sampled_from(["a", "b", "c", "d", "e", ".."]), max_size=8))
def test_a_watch_that_vouches_finds_what_the_folder_shows(
    tmp_path_factory: pytest.TempPathFactory, planted: list[tuple[str, str]], ids: list[str],
) -> None:
    root = tmp_path_factory.mktemp("exist") / "root"
    write_request(root, S, "a")
    inbox = SessionInbox(root, S)
    responses = session_dir(root, S) / "responses"
    boxes = Outboxes(lambda folder, pid, target: None, lambda: None)
    fd = os.open(responses, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert boxes.watch(inbox.folder_name, fd, platform.proc_fd_path(fd))
        outbox.register(boxes, tell)
        try:
            assert existing_responses(inbox, ids) == frozenset()  # the first look lists the folder
            for request_id, kind in planted:
                target = responses / f"{request_id}.json"
                if os.path.lexists(target):
                    continue
                if kind == "file":
                    target.write_text("planted")
                elif kind == "link":
                    target.symlink_to("/nonexistent")
                else:
                    target.mkdir()
            vouched = existing_responses(inbox, ids)
            assert outbox.existing(fd, response_names(ids)) is not None  # the watch vouched
        finally:
            outbox.unregister(boxes)
        assert vouched == existing_responses(inbox, ids)  # the slow path, no watch registered
        assert vouched == frozenset(set(os.listdir(responses)).intersection(response_names(ids)))
    finally:
        os.close(fd)
        boxes.close()


def test_a_folder_no_watch_vouches_for_is_looked_at_as_before(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_request(root, S, "a")
    (session_dir(root, S) / "responses" / "a.json").write_text("{}")
    assert existing_responses(SessionInbox(root, S), ["a", "b"]) == frozenset({"a.json"})
