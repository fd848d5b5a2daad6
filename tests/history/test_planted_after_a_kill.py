"""An empty response someone else planted after a killed run recorded its verdict is not this node's
answer (campaign5, issue 37's sixth pass; burst seed 502: 48 asks).

A restart took a response that is a start of the recorded bytes (empty included) for this node's own,
what a power cut left of it (`Reconcile.earlier`, `docs/design/reliability.md`, "A response's own
flush"). But a killed process is not a power cut: the page cache outlives it, so a response it linked
holds every byte. Here the killed run recorded its verdict and never linked it (killed at `recorded`, a
real process); another process then created an empty file under the name. The restart noted this
node's approval delivered and removed the request, while the child read an empty file (a denial for a
pi child). Now a response cut short is taken for this node's only when the machine started again
since its verdict was recorded (`Seams.booted_at`): here it did not, so it is forged.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from core.vocabulary.asks import DenyingArbiter
from tests.helpers import response_path, session_dir, wait_for, write_request
from tests.history.support import ALLOW_LS, Node, S, intent, run_until_killed


async def restart_until_served(node: Node) -> None:
    await node.start(DenyingArbiter())
    try:
        requests = session_dir(node.root, S) / "requests"
        await wait_for(lambda: not (requests / "r1.json").exists(), what="the request served")
    finally:
        await node.stop()


def test_an_empty_response_planted_after_a_kill_is_not_noted_as_this_nodes_answer(tmp_path: Path) -> None:
    node = Node(tmp_path, ALLOW_LS)
    write_request(node.root, S, "r1", accessIntent=intent("bash", "ls -la"))
    killed = run_until_killed(tmp_path, "recorded")
    assert killed.returncode == 137, killed.stderr
    recorded = node.history.recorded_verdicts(S, ["r1"])["r1"]
    assert not recorded.written
    planted = response_path(node.root, S, "r1")
    os.close(os.open(planted, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # someone else's, empty

    asyncio.run(restart_until_served(node))

    assert planted.read_bytes() == b""  # never replaced: what the child reads
    rows = node.history.query()
    assert not [r for r in rows if r.request_id == "r1" and r.written == 1], "noted as this node's, delivered"
    assert any(r.outcome == "forged" for r in rows if r.request_id == "r1")
