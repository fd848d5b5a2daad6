"""Run inside a private mount namespace (`unshare -m`, as root) by `test_full_disk_queue.py`: the state
dir is on a small tmpfs. A burst's arrivals (as many as asked) are queued (an event loop runs, so
they wait for one transaction), the disk fills, the transaction that writes them is refused, the disk
is freed and the queue written again. Prints one JSON line: how many arrivals were queued, what the refused
transaction raised (and the error under it), and how many rows the history holds then.

Usage: python -m tests.history.full_disk_queue <tmp dir> <arrivals>
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from core.history import HistoryStore
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from tests.helpers import fill


def main(tmp: Path, queued: int) -> None:
    fs = tmp / "fs"
    fs.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(fs)], check=True)
    try:
        store = HistoryStore.in_state_dir(fs / "state")
        refused: list[str] = []

        now = time.time()  # (rows as old as the epoch would be pruned by age)

        async def burst() -> None:
            # No await: the queue's own worker never runs, so every arrival waits for the one below.
            for i in range(queued):
                body = {"id": f"a{i}", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                        "requesterAgentName": "Explore", "message": "m" * 500}
                parsed = parse_request(json.dumps(body).encode())
                store.observe(ServeEvent("arrived", AskKey("s", f"a{i}.json"), now, parsed))
            filler = fill(fs)
            try:
                store.write_arrivals()
            except Exception as exc:
                refused.append(f"{exc} (under it: {exc.__context__})")
            filler.unlink()
            store.write_arrivals()

        asyncio.run(burst())
        rows = len(store.query(limit=queued * 2))
        store.close()
        print(json.dumps({"queued": queued, "refused": refused, "rows": rows}))
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
