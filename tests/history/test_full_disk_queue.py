"""Campaign6 finding 1: the history's queued events (a burst's arrivals, an unrecorded fail-safe
answer's close) are put back in the queue when the transaction that writes them is refused, so the
next one writes them: unless SQLite has already rolled the transaction back itself (a full disk
refusing a statement that spills the page cache), when the writer's own `ROLLBACK` raises "no
transaction is active" in its `except` and the events taken from the queue are dropped (2,000
arrivals). The same when the `COMMIT` itself is refused, outside that `except` (50 arrivals: what
`serve` met, run 621). A real full disk: a tmpfs in a private mount namespace
(`tests.history.full_disk_queue`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import in_private_mounts


@pytest.mark.parametrize("queued", [50, 2000], ids=["commit-refused", "rolled-back-by-sqlite"])
def test_arrivals_queued_when_a_full_disk_refuses_their_transaction_are_written_once_it_is_freed(
    tmp_path: Path, queued: int,
) -> None:
    found = in_private_mounts(["-m", "tests.history.full_disk_queue", str(tmp_path), str(queued)], 120)
    assert found["refused"], found  # the full disk did refuse the transaction
    assert found["rows"] == found["queued"], found
