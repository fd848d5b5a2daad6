"""A history whose disk is full at exit with more queued than its reserved space holds keeps what
matters most there: the fail-safe answers its children read (only the spool can say so), as many as
fit, in order; before, the spool was all or nothing and every one was lost (a stop during a burst on
a full history: 206 rows, 268 KB, for a 256 KiB reserve). The spool is packed (`core.history.spool`):
the usual asks' closes all fit where ~180 of 400 did as plain lines; asks that do not pack (random
text) are cut as before. A real full disk: a small tmpfs in a private mount namespace, in a child
process (4 MiB: the next start writes the rows kept, ~1 KB each and their WAL pages, in the space the
filler held)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import in_private_mounts

CHILD = """
import json, os, sys, time
from pathlib import Path
from core.history import HistoryStore
from tests.helpers import fill, small_tmpfs
from tests.history.support import observe_refused, spooled_close

count, packs, size = int(sys.argv[2]), sys.argv[3] == "packs", sys.argv[4]
with small_tmpfs(Path(sys.argv[1]), size) as fs:
    state = fs / "state"
    store = HistoryStore.in_state_dir(state)
    filler = fill(fs)
    observe_refused(store, (spooled_close(i, "x" * 600 if packs else os.urandom(300).hex(), time.time())
                            for i in range(count)))
    store.close()  # still full: spooled into the reserved space, as much as it holds
    filler.unlink()
    again = HistoryStore.in_state_dir(state)
    rows = again.query()
    print(json.dumps({"outcomes": sorted({r.outcome for r in rows}), "ids": [r.request_id for r in rows]}))
    again.close()
"""


def test_the_fail_safe_answers_that_fit_the_reserve_are_kept(tmp_path: Path) -> None:
    said = in_private_mounts(["-c", CHILD, str(tmp_path), "600", "random", "4m"], 300)
    assert said["outcomes"] == ["fail-safe"]
    ids = said["ids"]
    assert 100 <= len(ids) < 600  # as many as 240 KiB holds (~0.4 KB each packed), not all, never none
    assert sorted(ids, key=lambda rid: int(rid[1:])) == [f"r{i}" for i in range(len(ids))]  # the first ones


def test_the_usual_closes_all_fit_packed(tmp_path: Path) -> None:
    """400 closes of ~1.3 KB each as plain lines (~180 fitted), all kept packed."""
    said = in_private_mounts(["-c", CHILD, str(tmp_path), "400", "packs", "4m"], 300)
    assert said["outcomes"] == ["fail-safe"]
    assert sorted(said["ids"], key=lambda rid: int(rid[1:])) == [f"r{i}" for i in range(400)]
