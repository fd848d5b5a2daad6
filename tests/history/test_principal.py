"""`requesterAgentName` and `principal.agentName` both shown, and flagged when they differ (issue 9 §5)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from core.serving.asks import DenyingArbiter
from tests.helpers import read_response_when_written, wait_for, write_request
from tests.history.support import Node, S, intent
from tui.commands.history_command import _cells


async def test_log_and_history_show_both_names_when_they_differ(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = Node(tmp_path, {"bash": {"git *": "allow"}})
    await node.start(DenyingArbiter())
    try:
        with caplog.at_level(logging.INFO, logger="pi_authorizer"):
            write_request(node.root, S, "r1", requesterAgentName="Plan",
                          accessIntent=intent("bash", "git status", agent="Explore"))
            await read_response_when_written(node.root, S, "r1")
            write_request(node.root, S, "r2", requesterAgentName="Explore",
                          accessIntent=intent("bash", "git log", agent="Explore"))
            await read_response_when_written(node.root, S, "r2")
            # The served line is logged once the request is removed, a moment after the response.
            await wait_for(
                lambda: any("request=r2" in (m := r.getMessage()) and "->" in m for r in caplog.records),
                what="r2's served line",
            )
    finally:
        await node.stop()
    messages = [record.getMessage() for record in caplog.records]
    served = [m for m in messages if "request=r" in m and "->" in m]
    assert any("request=r1" in m and "agent=Explore requester=Plan AGENT-MISMATCH" in m for m in served)
    assert any("request=r2" in m and "agent=Explore" in m and "MISMATCH" not in m for m in served)
    rows = {row.request_id: row for row in node.history.query()}
    assert rows["r1"].agent == "Explore" and rows["r1"].requester_agent() == "Plan"
    assert rows["r1"].agent_mismatch() is not None and rows["r2"].agent_mismatch() is None
    assert _cells(rows["r1"])[1] == "Explore [requester Plan]"
