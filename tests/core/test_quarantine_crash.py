"""A process killed at each point of holding a file leaves nothing moved or the file with its reason.

The kill comes through the quarantine's explicit `fault` seam (`tests/core/quarantine_child.py` exits
with `os._exit(137)` at a stage of `HOLD_CHECKPOINTS`); a later prune, or a serving core starting on the same
state dir, completes or removes what the dead process left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.disk.paths import encode_session_id
from core.seams import Seams
from core.serving.asks import DenyingArbiter
from core.serving.quarantine import HOLD_CHECKPOINTS, QUARANTINE_MAX_AGE_S, Quarantine
from core.testing import ManualClock
from tests.helpers import session_dir, wait_for, write_request_bytes
from tests.history.support import Node, S

REPO = Path(__file__).resolve().parents[2]
NAME = "bad.json"
DATA = b"not json at all"


def killed_holding(tmp_path: Path, stage: str) -> None:
    """A real process holds `requests/bad.json` and dies at `stage`."""
    write_request_bytes(tmp_path / "root", S, NAME, DATA)
    command = [sys.executable, "-m", "tests.core.quarantine_child",
               str(tmp_path / "root"), str(tmp_path / "state"), S, NAME, stage]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, timeout=60, check=False)
    assert done.returncode == 137, done.stderr.decode()


def held(tmp_path: Path) -> list[str]:
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def in_inbox(tmp_path: Path) -> bool:
    return (session_dir(tmp_path / "root", S) / "requests" / NAME).exists()


def assert_whole(tmp_path: Path) -> None:
    """Either nothing moved (the file in the inbox, nothing held) or the file held with its reason."""
    names = held(tmp_path)
    if in_inbox(tmp_path):
        assert names == []
        return
    assert len(names) == 2 and names[1] == names[0] + ".reason.json", names
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    assert (folder / names[0]).read_bytes() == DATA
    assert json.loads((folder / names[1]).read_bytes())["reason"].startswith("unusable")


# What the kill leaves, before anything cleans up: the reason is always on disk first.
# (the file still in the inbox, the endings of what is held)
AFTER_KILL: dict[str, tuple[bool, tuple[str, ...]]] = {
    "reasoned": (True, (".pending.json",)),
    "moved": (False, ("", ".pending.json")),
}


@pytest.mark.parametrize("stage", HOLD_CHECKPOINTS)
def test_a_kill_at_each_stage_leaves_nothing_or_the_file_with_its_reason_after_a_prune(
    tmp_path: Path, stage: str
) -> None:
    killed_holding(tmp_path, stage)
    names = held(tmp_path)
    stem = names[0].removesuffix(".pending.json")
    still_in_inbox, ends = AFTER_KILL[stage]
    assert in_inbox(tmp_path) == still_in_inbox
    assert names == sorted(stem + end for end in ends)
    quarantine = Quarantine(tmp_path / "state")
    assert quarantine.prune() == 0
    assert_whole(tmp_path)
    assert len(quarantine.records()) == (0 if stage == "reasoned" else 1)


@pytest.mark.parametrize("stage", HOLD_CHECKPOINTS)
async def test_a_serving_core_started_after_the_kill_holds_the_file_once_with_its_reason(
    tmp_path: Path, stage: str
) -> None:
    killed_holding(tmp_path, stage)
    node = Node(tmp_path)
    await node.start(DenyingArbiter())
    try:
        await wait_for(lambda: not in_inbox(tmp_path) and not any(n.endswith(".pending.json")
                                                                     for n in held(tmp_path)))
        assert_whole(tmp_path)
    finally:
        await node.stop()


def test_a_live_holder_s_pending_reason_is_left_alone_until_it_is_too_old(tmp_path: Path) -> None:
    """Another process may be holding right now: only a dead process's leftovers are touched, or
    one older than the age limit (its pid now another process's)."""
    killed_holding(tmp_path, "reasoned")
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    (pending,) = os.listdir(folder)
    stamp, ns, unique, rest = pending.split("-", 3)
    live = f"{stamp}-{ns}-{os.getppid()}.{unique.split('.')[1]}-{rest}"
    os.rename(folder / pending, folder / live)
    assert Quarantine(tmp_path / "state").prune() == 0
    assert os.listdir(folder) == [live]
    later = ManualClock(time.time() + QUARANTINE_MAX_AGE_S + 60)
    assert Quarantine(tmp_path / "state", seams=Seams(clock=later)).prune() == 0
    assert os.listdir(folder) == []


def test_a_copy_cut_short_across_filesystems_is_removed_with_its_pending_reason(tmp_path: Path) -> None:
    """Across filesystems the file is copied under `core.disk.entries.temp_name` first: a kill mid-copy
    leaves that temp beside the pending reason (made here by hand: the copy has no fault point)."""
    killed_holding(tmp_path, "reasoned")
    folder = tmp_path / "state" / "quarantine" / encode_session_id(S)
    (pending,) = os.listdir(folder)
    stem = pending.removesuffix(".pending.json")
    dead_pid = stem.split("-")[2].split(".")[0]
    (folder / f"{stem}.{dead_pid}.1800000000000.tmp").write_bytes(DATA[:3])
    assert Quarantine(tmp_path / "state").prune() == 0
    assert os.listdir(folder) == []
    assert in_inbox(tmp_path)
