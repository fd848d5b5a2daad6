"""A quarantine folder that is really full for a while (campaign3, finding 3): a file serving cannot use
(a request whose response someone else wrote first, a request cut short) is set aside once the
quarantine has space again, as a full disk's answers are written once it allows: a transient I/O error
waits and is retried, the file is never left in the inbox for good. A real `serve`, the quarantine a
small tmpfs in a private mount namespace (`tests/core/full_quarantine_driver.py`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import namespace_refused
from tests.history.support import REPO


@pytest.mark.timeout(240)
def test_unusable_files_are_set_aside_once_the_full_quarantine_has_space_again(tmp_path: Path) -> None:
    refused = namespace_refused()
    if refused is not None:
        pytest.skip(refused)
    command = ["unshare", "-m", "--propagation", "private", sys.executable, "-m",
               "tests.core.full_quarantine_driver", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, timeout=200)
    lines = done.stdout.decode().strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr.decode(errors="replace")[-3000:]
    seen = json.loads(lines[-1])
    tail = seen["log_tail"]
    assert seen["alive"] is True, tail
    assert seen["requests_left"] == [], f"left in the inbox after the quarantine had space: {tail}"
    assert seen["reasons"] == ["broken.json.reason.json", "forged.json.reason.json"], tail
