"""A real serving process that dies (`os._exit(137)`: no cleanup, no flush, like SIGKILL) at one stage.

Run: `python -m tests.history.crash_child ROOT STATE AGENT_DIR STAGE [NTH] [named]`. The process is wired
like `serve --on-ask deny` (this node's rules, the history as ledger and observer); the stage comes
through the core's explicit `fault` seam and kills the process the NTH time (default 1) it is reached.
`named` stages responses as named temps, as on a filesystem without anonymous files (`O_TMPFILE`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from core.disk.writer import DiskWriter
from core.history import HistoryStore
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.seams import Seams
from core.serving import ServingCore
from core.serving.publisher import CHECKPOINTS
from core.vocabulary.asks import DenyingArbiter
from tests.history.support import S


class NamedTemps(DiskWriter):
    anonymous = False


async def serve(root: Path, state: Path, agent_dir: Path, stage: str, nth: int, named: bool) -> None:
    history = HistoryStore.in_state_dir(state)
    authority = RecordedAuthority(PolicyStore(agent_dir, None, None, home="/home/me"))
    reached = [0]

    def fault(at: str) -> None:
        if at == stage:
            reached[0] += 1
            if reached[0] == nth:
                os._exit(137)

    writer = NamedTemps() if named else DiskWriter()
    core = ServingCore(root, state, DenyingArbiter(), judge=authority, ledger=history,
                       seams=Seams(disk=writer, fault=fault))
    core.subscribe(history.observe)
    core.add_session(S)
    await core.run()


def main() -> None:
    root, state, agent_dir, stage = sys.argv[1:5]
    nth = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    named = sys.argv[6:7] == ["named"]
    if stage not in (*CHECKPOINTS, "reasoned", "moved"):  # the publisher's, or the quarantine's
        raise SystemExit(f"unknown stage {stage!r}")
    asyncio.run(serve(Path(root), Path(state), Path(agent_dir), stage, nth, named))


if __name__ == "__main__":
    main()
