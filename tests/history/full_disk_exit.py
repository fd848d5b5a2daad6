"""Run inside a private mount namespace (`unshare -m`, as root) by `test_ledger_failures.py`: the
state dir is on a small tmpfs. A person's approval the history refuses becomes a fail-safe denial
(its close queued); the disk then fills; the history closes still failing. The next start, the disk
freed, prints one JSON line: the row's outcome (`fail-safe`: the close was kept in the reserved space;
`withdrawn` when it was lost).

Usage: python -m tests.history.full_disk_exit <tmp dir>
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from core.history import HistoryStore
from core.seams import Seams
from core.testing import Breakable
from tests.helpers import fill, serve_until_the_fail_safe
from tests.history.support import S


def main(tmp: Path) -> None:
    fs = tmp / "fs"
    fs.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(fs)], check=True)
    try:
        state = fs / "state"
        fault = Breakable()
        store = HistoryStore.in_state_dir(state, seams=Seams(fault=fault))
        asyncio.run(serve_until_the_fail_safe(tmp / "root", store, fault))
        filler = fill(fs)
        store.close()  # still failing, on a full disk
        filler.unlink()
        again = HistoryStore.in_state_dir(state)
        try:
            again.reconcile_open(S, set())
            print(json.dumps({"outcomes": [r.outcome for r in again.query()]}))
        finally:
            again.close()
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
