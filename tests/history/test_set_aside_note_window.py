"""A killed run leaves few set-aside denials linked without their note (campaign5, issue 37's sixth pass;
burst seed 505: 55 such files at one SIGKILL 0.7 s into a burst).

Campaign4's finding 1 was fixed by a note: once a malformed file's `gate_error` denial is linked, its
`quarantined` row says so (`Ledger.note_set_aside_answered`) before the file moves, so a restart that
reads the file again moves it without a second answer. The note waited for the loop while the
quarantine's threads linked the other files' denials: with a real process killed (its own fault
seam, `tests/history/crash_child.py`) at the first move of a backlog of 800 malformed files, 541-549
of the denials linked had no note, each answered again by a restart after its child read it. The note
now follows its link on the same thread: at most the files in flight on the quarantine's threads are
caught between the two.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.history import HistoryStore
from core.serving.quarantine import QUARANTINE_THREADS
from tests.helpers import session_dir, write_request_bytes
from tests.history.support import S, run_until_killed

#: 800: 541-549 unnoted at the kill (400: 143-150, and once 4 or fewer under a loaded run; 200: 5).
FILES = 800


def test_a_kill_at_the_first_move_leaves_at_most_the_files_in_flight_answered_without_a_note(
    tmp_path: Path,
) -> None:
    for i in range(FILES):
        write_request_bytes(tmp_path / "root", S, f"m{i:04d}.json", b'{"id": NaN}')
    killed = run_until_killed(tmp_path, "moved")
    assert killed.returncode == 137, killed.stderr

    responses = session_dir(tmp_path / "root", S) / "responses"
    linked = {name for name in os.listdir(responses) if name.endswith(".json")}
    history = HistoryStore.in_state_dir(tmp_path / "state")
    noted = {row.request_name for row in history.query() if row.outcome == "quarantined" and row.written == 1}
    history.close()
    assert linked, "no denial was linked before the first move"
    unnoted = sorted(linked - noted)
    assert len(unnoted) <= QUARANTINE_THREADS, f"{len(unnoted)} of {len(linked)} linked without a note"
