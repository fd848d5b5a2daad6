"""A written response whose note the history refused through every retry (campaign3, finding 4: a
disk full for longer than the retries) is noted once the history takes writes again, while serving
goes on: not left open with `written` unknown until a restart, which can then only say "delivery
unknown" when the child has read and removed the response meanwhile, as children do at once."""

from __future__ import annotations

from pathlib import Path

from core.history import HistoryStore
from core.testing import FailingLedger, ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import (
    Served,
    needs_inotify,
    read_response_when_written,
    response_path,
    wait_for,
    write_request,
)
from tests.history.support import S


@needs_inotify
async def test_a_written_mark_refused_through_every_retry_is_noted_once_the_history_takes_writes(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1_800_000_000.0)
    store = HistoryStore.in_state_dir(tmp_path / "state")
    # Every attempt at noting the first answer fails (the first try and the three retries).
    ledger = FailingLedger(store, failures=0, error="database or disk is full", mark_failures=4)
    try:
        async with Served(tmp_path, DenyingArbiter(clock), ledger=ledger, clock=clock) as served:
            served.core.subscribe(store.observe)
            write_request(served.root, S, "first")
            await read_response_when_written(served.root, S, "first")
            await wait_for(lambda: ledger.mark_attempts >= 4, what="every note of it refused")
            response_path(served.root, S, "first").unlink()  # its child read it and removed it
            write_request(served.root, S, "second")  # the history takes writes again
            await read_response_when_written(served.root, S, "second")
            noted = lambda: {r.request_id: r.written for r in store.query()}.get("second") == 1  # noqa: E731
            await wait_for(noted, what="the second answer noted")
            first = {r.request_id: r for r in store.query()}["first"]
        assert (first.written, first.ended_at is not None) == (1, True), "the first answer left open, unnoted"
    finally:
        store.close()
