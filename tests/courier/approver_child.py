"""An approver node in a process of its own, killed with SIGKILL by a test: a `BrokerInbox` whose
arbiter approves the parcels whose id ends in an even digit and holds the rest (a person who has not
looked yet), or approves everything (`all`). Prints `ready` once it serves.

Run: `python -m tests.courier.approver_child URL NODE even|all [STATE_DIR]` (with a state dir, the
node keeps its history there, as `--broker` does).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from core.courier.broker_inbox import BrokerInbox
from core.courier.signing import node_key
from core.history import HistoryStore
from core.serving.judgment import NoRecordedAuthority
from core.testing import ScriptedArbiter
from core.vocabulary.asks import Ask


async def serve(url: str, node: str, mode: str, state: str | None = None) -> None:
    def script(ask: Ask) -> str | None:
        return "allow" if mode == "all" or int(ask.key.name[-1]) % 2 == 0 else None

    history = HistoryStore.in_state_dir(Path(state)) if state else None
    key = node_key(Path(state), node) if state else None  # the same key across its restarts
    inbox = BrokerInbox(url, node=node, judge=NoRecordedAuthority(), arbiter=ScriptedArbiter(node, script),
                        ack_wait_s=1.0, ledger=history, observe=None if history is None else history.observe,
                        node_key=key)
    await inbox.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(*sys.argv[1:4], *sys.argv[4:5]))
