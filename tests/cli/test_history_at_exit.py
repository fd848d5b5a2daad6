"""Whatever the history could not write while serving is written, or spooled beside it, when a command
stops serving: `serve` never closed its history, so a SIGTERM on a full state dir dropped every queued
fail-safe close (3,559 children read the denial in one campaign run, and no row, no spool held it).
A real `serve` in a private mount namespace, its state dir on a 1 MiB tmpfs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import namespace_refused

REPO = Path(__file__).resolve().parents[2]


def test_a_fail_safe_close_queued_when_serve_is_stopped_on_a_full_disk_is_kept(tmp_path: Path) -> None:
    refused = namespace_refused()
    if refused is not None:
        pytest.skip(refused)
    command = ["unshare", "-m", "--propagation", "private", sys.executable, "-m",
               "tests.cli.serve_full_history_exit", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, timeout=180)
    lines = done.stdout.decode().strip().splitlines()
    log = (tmp_path / "serve.log").read_text(errors="replace") if (tmp_path / "serve.log").exists() else ""
    assert done.returncode == 0 and lines, done.stderr.decode(errors="replace")[-3000:] + log[-3000:]
    said = json.loads(lines[-1])
    assert said == {"exit": 0, "answer": "gate_error", "outcomes": ["fail-safe"]}, log[-3000:]
