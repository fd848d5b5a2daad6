"""A flood of request files against `serve --on-ask deny` (history on): drain time and the longest
time the serving heartbeat went without a refresh while the inbox drained (issue 9 §1).

Run: `uv run python -m bench.bench_flood [COUNT]` (default 20,000). Target: no heartbeat gap near
the 5 s a child or another authorizer takes as stale (the heartbeat is refreshed every second).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.roundtrip import SESSION, base_request, start_serve
from core.disk.paths import encode_session_id
from core.forwarding.liveness import read_heartbeat


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory() as tmp:
        root, state = Path(tmp) / "root", Path(tmp) / "state"
        session = root / "sessions" / encode_session_id(SESSION)
        (session / "requests").mkdir(parents=True)
        (session / "responses").mkdir()
        proc = start_serve(root, state, ["--on-ask", "deny", "--agent-dir", tmp, "--project", tmp])
        beat = root / "serving" / f"{encode_session_id(SESSION)}.json"
        try:
            staging = Path(tmp) / "staging"
            staging.mkdir()
            for i in range(count):
                rid = f"flood-{i:06d}"
                (staging / f"{rid}.json").write_bytes(json.dumps(base_request(rid)).encode())
            start = time.monotonic()
            for path in staging.iterdir():
                os.rename(path, session / "requests" / path.name)
            last_seen, last_change, longest = None, time.monotonic(), 0.0
            while len(os.listdir(session / "responses")) < count:
                record = read_heartbeat(beat)
                now = time.monotonic()
                if record is not None and record.updated_at_ms != last_seen:
                    last_seen, last_change = record.updated_at_ms, now
                longest = max(longest, now - last_change)
                time.sleep(0.02)
            drained = time.monotonic() - start
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
    print(f"flood of {count} request files: drained in {drained:.1f} s ({count / drained:.0f}/s); "
          f"longest heartbeat gap while draining {longest:.2f} s")


if __name__ == "__main__":
    main()
