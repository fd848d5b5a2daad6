"""`pi-authorizer history` lists as the app does: newest first, times to decide in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.history import HistoryStore
from tui.cli import main
from tui.render.history import wait_text


def test_history_lists_newest_first_in_seconds_as_the_app(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    store = HistoryStore.in_state_dir(state)
    for n, arrived in enumerate((1_700_000_010.0, 1_700_000_020.0, 1_700_000_030.0)):
        store.insert_rows([{
            "served_session": "s", "request_name": f"r{n}.json", "request_id": f"r{n}",
            "agent": f"agent-{n}", "created_at": arrived * 1000, "arrived_at": arrived,
            "shown_at": arrived, "decided_at": arrived + 2, "ended_at": arrived + 2,
            "decide_ms": 250.0 + n * 60_000, "outcome": "user", "verdict": "approved",
        }])
    in_app = [str(row.agent) for row in store.query()]
    store.close()
    assert main(["history", "--state-dir", str(state)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    listed = [next(a for a in in_app if a in line) for line in lines]
    assert listed == in_app == ["agent-2", "agent-1", "agent-0"]
    assert wait_text(250.0) in lines[2] and wait_text(120_250.0) in lines[0]
    assert (wait_text(250.0), wait_text(120_250.0)) == ("0.250s", "120s")
