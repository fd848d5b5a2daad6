"""A history whose disk is still full at the next start and full again at that start's stop keeps
both runs' fail-safe answers (campaign10: a SIGTERM on a full disk, a restart that found it still
full, a second SIGTERM: the second run's fail-safe closes, read by their children, were lost, 227 in
one run). The first stop's spool took the reserve; the next start cannot take the reserve again
(the disk is full: the spooled rows, or SQLite's pages, hold its space); at that start's stop
`spool.save` finds no reserve to give up (`remove` says nothing when there is none: the log still
says "the reserved space is used"), cannot write the new spool, and keeps nothing queued since.
A real full disk: a small tmpfs in a private mount namespace, in a child process."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import in_private_mounts

CHILD = """
import json, sys, time
from pathlib import Path
from core.history import HistoryStore
from tests.helpers import fill, small_tmpfs
from tests.history.support import observe_refused, spooled_close

with small_tmpfs(Path(sys.argv[1]), "2m") as fs:
    state = fs / "state"

    def closes(store, first, count):
        observe_refused(store, (spooled_close(i, "m", time.time()) for i in range(first, first + count)))

    store = HistoryStore.in_state_dir(state)  # the reserve taken
    filler = fill(fs)
    closes(store, 0, 50)
    store.close()  # full: spooled into the reserve
    again = HistoryStore.in_state_dir(state)  # still full: the spool is read, not written; no reserve
    closes(again, 50, 50)
    again.close()  # still full: the spool (both runs' closes) written again
    filler.unlink()
    last = HistoryStore.in_state_dir(state)
    ids = sorted((r.request_id for r in last.query()), key=lambda rid: int(rid[1:]))
    print(json.dumps({"ids": ids}))
    last.close()
"""


def test_a_second_stop_on_a_still_full_disk_keeps_both_runs_fail_safe_answers(tmp_path: Path) -> None:
    said = in_private_mounts(["-c", CHILD, str(tmp_path)], 300)
    assert said["ids"] == [f"r{i}" for i in range(100)]
