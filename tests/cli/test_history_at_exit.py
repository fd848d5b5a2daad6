"""Whatever the history could not write while serving is written, or spooled beside it, when a command
stops serving: `serve` never closed its history, so a SIGTERM on a full state dir dropped every queued
fail-safe close (3,559 children read the denial in one campaign run, and no row, no spool held it).
A real `serve` in a private mount namespace, its state dir on a 1 MiB tmpfs."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import in_private_mounts


def test_a_fail_safe_close_queued_when_serve_is_stopped_on_a_full_disk_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"

    def log_tail() -> str:
        return log.read_text(errors="replace")[-3000:] if log.exists() else ""

    said = in_private_mounts(["-m", "tests.cli.serve_full_history_exit", str(tmp_path)], 180, log_tail)
    assert said == {"exit": 0, "answer": "gate_error", "outcomes": ["fail-safe"]}, log_tail()
