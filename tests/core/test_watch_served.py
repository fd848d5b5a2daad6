"""inotify watches only for served inboxes (issue 21, finding 5): folders nobody serves (a child may
make ~96k) cost no watch; a session taken later gets its watches; asks still arrive by file event."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from core.disk.paths import encode_session_id
from core.forwarding.survey import MAX_SURVEYED, survey_inboxes
from core.platform import inotify_watch_limit as watch_limit
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import Served, needs_inotify, read_response_when_written, wait_for, write_request
from tests.history.support import S

OTHER = "019ff969-c34c-70be-9034-fae19c852999"


def inotify_watches() -> int:
    """The inotify watches this process holds now (`/proc/self/fdinfo` of its inotify descriptors)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                count += sum(1 for line in info if line.startswith("inotify wd:"))
        except OSError:
            continue
    return count


@needs_inotify
async def test_only_served_inboxes_are_watched(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for n in range(60):  # empty session folders of sessions nobody serves
        (root / "sessions" / f"junk-{n}" / "requests").mkdir(parents=True)
    (root / "sessions" / encode_session_id(S) / "requests").mkdir(parents=True)
    before = inotify_watches()
    async with Served(tmp_path, DenyingArbiter()) as served:
        await wait_for(lambda: inotify_watches() - before >= 3, what="the watches of the served inbox")
        write_request(root, S, "a")  # arrives by file event
        await read_response_when_written(root, S, "a")
        assert inotify_watches() - before <= 4  # sessions/, the served folder, its requests/ and responses/
        (root / "sessions" / encode_session_id(OTHER) / "requests").mkdir(parents=True)
        served.core.add_session(OTHER)
        await wait_for(lambda: inotify_watches() - before >= 6, what="the later session watched")
        write_request(root, OTHER, "b")
        await read_response_when_written(root, OTHER, "b")
        assert inotify_watches() - before <= 7


@needs_inotify
async def test_exhausted_watches_are_reported_once_with_the_limit_and_served_inboxes_are_polled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kernel refuses a watch with ENOSPC (the fault seam at `inotify_add_watch`): said once in the
    log with the user's limit; the served inbox is polled (its asks answered); nothing else listed."""
    caplog.set_level(logging.INFO, "pi_authorizer")
    refused: list[str] = []

    def no_watches_left(checkpoint: str) -> None:
        if checkpoint == "inotify_add_watch":
            refused.append(checkpoint)
            raise OSError(errno.ENOSPC, "No space left on device")

    root = tmp_path / "root"
    (root / "sessions" / encode_session_id(S) / "requests").mkdir(parents=True)
    async with Served(tmp_path, DenyingArbiter(), fault=no_watches_left):
        await wait_for(lambda: bool(refused), what="a watch refused")
        for n in range(3):
            write_request(root, S, f"polled{n}")
            await read_response_when_written(root, S, f"polled{n}")
        # Polling lists the served `responses/` too: a live process's temp there is another server.
        other = os.getppid()  # alive, and not this process
        (root / "sessions" / encode_session_id(S) / "responses" / f"x.json.{other}.1.tmp").write_text("{}")
        seen = f"another server answers session {S} (pid {other}"
        await wait_for(lambda: seen in caplog.text, what="the other server seen by polling")
    said = [r.getMessage() for r in caplog.records if "inotify watches are used up" in r.getMessage()]
    assert len(said) == 1, said
    limit = watch_limit()
    shown = f"{limit:,}" if limit is not None else "unknown"
    assert f"fs.inotify.max_user_watches = {shown}" in said[0]
    assert "polling the served inboxes" in said[0]


def test_a_survey_of_the_other_inboxes_is_bounded(tmp_path: Path) -> None:
    """A child may make ~96k session folders: a survey (the sessions view) looks into at most
    `MAX_SURVEYED` of them."""
    sessions = tmp_path / "root" / "sessions"
    for n in range(MAX_SURVEYED + 5):
        (sessions / f"junk-{n:05d}").mkdir(parents=True)
    surveyed = survey_inboxes(tmp_path / "root")
    assert len(surveyed) == MAX_SURVEYED
    assert surveyed[0].folder == "junk-00000"
