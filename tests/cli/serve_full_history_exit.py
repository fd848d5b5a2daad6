"""Run inside a private mount namespace (`unshare -m`, as root) by `test_history_at_exit.py`: a real
`serve` whose state dir is on a small tmpfs. The disk fills, an ask comes: its verdict cannot be
recorded, so the child reads the fail-safe denial and the row's close is queued. serve is stopped
(SIGTERM) with the disk still full. The disk freed, the next open of the history prints one JSON line:
the outcomes of its rows (`fail-safe`: the close was spooled at exit and written now).

Usage: python -m tests.cli.serve_full_history_exit <tmp dir>
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from core.disk.paths import encode_session_id
from core.history import HistoryStore
from tests.helpers import fill, poll_until, response_path, write_request

SESSION = "full-at-exit"


def main(tmp: Path) -> None:
    fs = tmp / "fs"
    fs.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(fs)], check=True)
    try:
        root, state = tmp / "root", fs / "state"
        root.mkdir()
        log = tmp / "serve.log"
        with log.open("w") as sink:
            serve = subprocess.Popen(
                [sys.executable, "-m", "tui.cli", "serve", "--session", SESSION, "--forwarding-root",
                 str(root), "--state-dir", str(state)],
                stdout=sink, stderr=subprocess.STDOUT)
            try:
                heartbeat = root / "serving" / f"{encode_session_id(SESSION)}.json"
                poll_until(lambda: heartbeat.exists() or serve.poll() is not None, what="serve serving")
                filler = fill(fs)
                write_request(root, SESSION, "refused-row")
                response = response_path(root, SESSION, "refused-row")
                poll_until(lambda: response.exists() or serve.poll() is not None, what="its answer")
                answer = json.loads(response.read_bytes())
            finally:
                serve.send_signal(signal.SIGTERM)
                code = serve.wait(60)
        filler.unlink()
        again = HistoryStore.in_state_dir(state)
        try:
            again.reconcile_open(SESSION, set())
            print(json.dumps({"exit": code, "answer": answer["decidedBy"]["kind"],
                              "outcomes": [row.outcome for row in again.query()]}))
        finally:
            again.close()
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
