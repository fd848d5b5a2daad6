"""An arrival queued for the history when the disk is full at the transaction's COMMIT (the statements
went through; SQLite refuses, and rolls back, only as the transaction commits): the writer says what
it cannot write stays queued (the next transaction writes it, or `close` spools it): the events a
transaction took from the queue go back also when its COMMIT is refused (they were put back only when
its body failed: the arrival was lost, its ask had no row; review3, finding 3). A real full disk: a
small tmpfs in a private mount namespace, in a child process."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import in_private_mounts

CHILD = """
import json, sys, time
from pathlib import Path
from core.history import HistoryStore
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from tests.helpers import fill, small_tmpfs

with small_tmpfs(Path(sys.argv[1]), "1m") as fs:
    state = fs / "state"
    raw = json.dumps({"id": "r1", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                      "requesterAgentName": "Explore", "message": "run it", "surface": "bash",
                      "value": "make"}).encode()
    store = HistoryStore.in_state_dir(state)
    filler = fill(fs)
    # (observed now: the retention keeps it)
    try:  # no loop running: queued and written at once, in a transaction whose COMMIT is refused
        store.observe(ServeEvent("arrived", AskKey("s", "r1.json"), time.time(), parse_request(raw), raw=raw))
        refused = None
    except Exception as exc:
        refused = type(exc).__name__
    filler.unlink()
    store.close()  # the disk freed: what is still queued is written now
    again = HistoryStore.in_state_dir(state)
    print(json.dumps({"refused": refused, "rows": [r.request_name for r in again.query()]}))
    again.close()
"""


def test_an_arrival_whose_transaction_cannot_commit_is_still_written(tmp_path: Path) -> None:
    seen = in_private_mounts(["-c", CHILD, str(tmp_path)], 120)
    assert seen["refused"] is not None, "the disk was not full at COMMIT: this test proves nothing"
    assert seen["rows"] == ["r1.json"]
