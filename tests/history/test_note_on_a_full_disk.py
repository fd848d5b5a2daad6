"""A withdrawal noted while the history's disk is full is not lost: once the disk frees, its row says
so in the same run (campaign10: `HistoryStore.observe` writes a note on one request, `withdrawn` or
`left`, in a transaction of its own; on a full disk the commit raises into the event loop, which logs
"observer failed on withdrawn" with a traceback, and the note is dropped: 502 such tracebacks in one
run; the row stays open until a later start reconciles it). Arrivals and fail-safe closes are queued
and written once the disk allows; these notes are not. A real full disk: a small tmpfs in a private
mount namespace, in a child process."""

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

with small_tmpfs(Path(sys.argv[1]), "2m") as fs:
    def parsed(rid):
        return parse_request(json.dumps({
            "id": rid, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
            "requesterAgentName": "Explore", "message": "m", "surface": "bash",
            "value": f"make {rid}"}).encode())

    store = HistoryStore.in_state_dir(fs / "state")
    store.observe(ServeEvent("arrived", AskKey("s", "a.json"), time.time(), parsed("a")))
    store.query()  # a read writes what is queued first: a's row is stored
    filler = fill(fs)
    try:
        store.observe(ServeEvent("withdrawn", AskKey("s", "a.json"), time.time(), parsed("a")))
        raised = None
    except Exception as exc:  # what the event loop logs as "observer failed on withdrawn"
        raised = type(exc).__name__
    filler.unlink()
    store.observe(ServeEvent("arrived", AskKey("s", "b.json"), time.time(), parsed("b")))
    rows = {row.request_id: row.outcome for row in store.query()}  # the disk free again: written
    print(json.dumps({"raised": raised, "a": rows.get("a")}))
    store.close()
"""


def test_a_withdrawal_noted_on_a_full_disk_reaches_its_row_once_the_disk_frees(tmp_path: Path) -> None:
    said = in_private_mounts(["-c", CHILD, str(tmp_path)], 300)
    assert said == {"raised": None, "a": "withdrawn"}
