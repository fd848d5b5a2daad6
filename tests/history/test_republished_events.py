"""A verdict recorded by a run killed before publishing it is reported `answered` when the restart
publishes it, once, so observers (the app's history, its log) hear of every answer written.

The first run is a real serving process killed through the core's `fault` seam
(`tests/history/crash_child.py`) after the history committed the verdict and before its response was
linked; the restart is a serving core in this process whose events are collected.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.serving.asks import AskKey, DenyingArbiter
from core.wire.response import encode_response
from tests.helpers import response_path, wait_for, write_request
from tests.history.support import ALLOW_LS, Node, S, intent, run_until_killed


async def restart_until_published(node: Node, request: Path, response: Path) -> None:
    await node.start(DenyingArbiter())
    try:
        await wait_for(lambda: response.exists() and not request.exists(), what="the verdict republished")
        await wait_for(lambda: node.only_row().written == 1, what="the publication noted")
        await node.core.rescan_all()
    finally:
        await node.stop()


@pytest.mark.parametrize("stage", ["recorded", "staged", "durable"])
def test_a_recorded_verdict_republished_after_a_kill_is_reported_answered_once(
    tmp_path: Path, stage: str
) -> None:
    node = Node(tmp_path, ALLOW_LS)
    request = write_request(node.root, S, "r1", accessIntent=intent("bash", "ls -la"))
    response = response_path(node.root, S, "r1")
    killed = run_until_killed(tmp_path, stage)
    assert killed.returncode == 137, killed.stderr
    recorded = node.history.recorded_verdicts(S, ["r1"])["r1"]
    assert not recorded.written and not response.exists() and request.exists()

    asyncio.run(restart_until_published(node, request, response))

    assert response.read_bytes() == recorded.body
    answered = [e for e in node.events if e.kind == "answered"]
    assert len(answered) == 1, [e.kind for e in node.events]
    [event] = answered
    assert event.key == AskKey(S, "r1.json") and event.outcome == "rule"
    assert event.parsed is not None and event.parsed.request.id == "r1"
    assert event.response is not None and encode_response(event.response) == recorded.body
    assert json.loads(recorded.body)["state"] == "approved"
    assert "arrived" not in [e.kind for e in node.events]  # published as recorded, never judged again
    node.history.close()
