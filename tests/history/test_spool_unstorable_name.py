"""A spooled event whose request name holds a lone surrogate (a child may name its file with bytes
that are not UTF-8: the listing decodes them so) is written like any other: the open row is looked
for by the name as the rows store it (`storable`). Bound as it is, SQLite raised UnicodeEncodeError in
every transaction that wrote the queue: the start's reconcile raised, the other spooled closes were
never written, and the spool was kept again at every exit. Review of dce7688 (a note is spooled now,
with no request needed) and older (a fail-safe close)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.history import HistoryStore, spool
from tests.history.support import SPOOLED_DENIAL, S, b64, spool_with, wire_request


@pytest.mark.parametrize("kind", ["withdrawn", "contested", "answered"])
def test_a_spooled_event_under_a_name_with_a_lone_surrogate_does_not_stop_the_history(
    tmp_path: Path, kind: str
) -> None:
    history = tmp_path / "history.sqlite3"
    line = {"kind": kind, "session": S, "name": "\udcff.json", "at": 1.0, "request": None, "response": None,
            "outcome": None, "reason": "why"}
    if kind == "answered":
        line.update(request=b64(wire_request("odd")), response=SPOOLED_DENIAL, outcome="fail-safe")
    (tmp_path / spool.spool_name(history)).write_bytes(
        spool_with(line))
    store = HistoryStore(history)
    try:
        assert store.reconcile_open(S, set()) == 0  # raised at every start
        assert ("good", "fail-safe") in [(row.request_id, row.outcome) for row in store.query()]
    finally:
        store.close()
    assert not (tmp_path / spool.spool_name(history)).exists()  # not spooled again
