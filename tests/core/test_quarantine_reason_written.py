"""A reason the quarantine keeps alone (its request already gone: the child read its answer and
removed it) was written in place, not made durable as pending and renamed as a held file's is (now it
is): a run SIGKILLed between creating it and writing it left a `.reason.json` holding nothing, which
the next run's prune neither completed nor removed (campaign2 finding B: `bench.campaign_burst` seed
15, `--kills 4`, pid 22553 killed at 12:22:19 left
`…-22553.53-b-001874.json.reason.json`, 0 bytes). The test starts from what that kill leaves.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from core.disk.paths import encode_session_id
from core.serving.quarantine import Quarantine
from tests.history.support import S

#: A pid no process has (above the kernel's pid_max): the holder is gone.
GONE_PID = 4_194_305


def test_an_empty_reason_left_by_a_killed_run_is_not_kept_as_an_entry(tmp_path: Path) -> None:
    held = tmp_path / "state" / "quarantine" / encode_session_id(S)
    held.mkdir(parents=True)
    for folder in (tmp_path / "state", tmp_path / "state" / "quarantine", held):
        folder.chmod(0o700)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    stem = f"{stamp}-000000001-{GONE_PID}.7-gone.json"
    (held / f"{stem}.reason.json").write_bytes(b"")  # created, killed before a byte was written
    (held / f"{stem}.reason.json").chmod(0o600)
    quarantine = Quarantine(tmp_path / "state")
    quarantine.prune()  # at start: what a dead process left is completed or removed
    for name in os.listdir(held):
        assert json.loads((held / name).read_bytes())["reason"], name  # every entry says why
