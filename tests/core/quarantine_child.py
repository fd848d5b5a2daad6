"""A process that holds one request file in the quarantine and dies (`os._exit(137)`: no cleanup, no
flush, like SIGKILL) at one stage of `Quarantine.hold`, through its explicit `fault` seam.

Run: `python -m tests.core.quarantine_child ROOT STATE SESSION NAME STAGE`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from core.forwarding.inbox import SessionInbox
from core.seams import Seams
from core.serving.quarantine import HOLD_CHECKPOINTS, Quarantine


def main() -> None:
    root, state, session, name, stage = sys.argv[1:6]
    if stage not in HOLD_CHECKPOINTS:
        raise SystemExit(f"unknown stage {stage!r}")

    def fault(at: str) -> None:
        if at == stage:
            os._exit(137)

    quarantine = Quarantine(Path(state), seams=Seams(fault=fault))
    quarantine.hold(SessionInbox(Path(root), session), name, "unusable", False)
    raise SystemExit("the stage was never reached")


if __name__ == "__main__":
    main()
