"""Responses written by one group-committed batch are accepted by the real 20.7.3 reader.

A burst of asks (rule allows, rule denies with a reason, fail-safe denials, an unusable file) is
served by a real serving core with the history on, so their answers share batches; then the
package's own `readForwardedPermissionResponse` reads every response file, exactly as a child does.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import request_body, session_dir, wait_for, write_request_bytes
from tests.interop.harness import NodeDriver
from tests.interop.ids import UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

RULES = {"bash": {"*": "ask", "ls *": "allow", "rm *": {"action": "deny", "reason": "no rm here"}}}


def _intent(value: str) -> dict[str, Any]:
    return {
        "surface": "bash",
        "matchValues": [value],
        "boundaryValue": None,
        "requesterCwd": "/w",
        "principal": {"sessionId": "c", "agentName": "Explore"},
    }


def _serve_burst(tmp_path: Path) -> dict[str, Any]:
    """Write the burst, serve it once; returns what each request is expected to get, by id."""
    from core.history import HistoryStore
    from core.judging.recorded import RecordedAuthority
    from core.rules import PolicyStore
    from core.serving import ServingCore
    from core.vocabulary.asks import DenyingArbiter

    agent = tmp_path / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": RULES}))
    root = tmp_path / "root"
    expected: dict[str, Any] = {}
    for i in range(24):
        rid = f"batch-{i:02d}"
        kind = ("ls", "rm", "none")[i % 3]
        fields: dict[str, Any] = {} if kind == "none" else {"accessIntent": _intent(f"{kind} x{i}")}
        body = json.dumps(request_body(rid, UUID_SESSION, **fields)).encode()
        write_request_bytes(root, UUID_SESSION, f"{rid}.json", body)
        expected[rid] = kind
    write_request_bytes(root, UUID_SESSION, "batch-bad.json", b'{"id": "batch-bad"}')
    expected["batch-bad"] = "bad"

    async def run() -> None:
        history = HistoryStore.in_state_dir(tmp_path / "state")
        authority = RecordedAuthority(PolicyStore(agent, None, None, home="/home/me"))
        core = ServingCore(root, tmp_path / "state", DenyingArbiter(), judge=authority, ledger=history)
        core.subscribe(history.observe)
        core.add_session(UUID_SESSION)
        task = asyncio.create_task(core.run())
        responses = session_dir(root, UUID_SESSION) / "responses"
        try:
            await wait_for(lambda: len(list(responses.glob("*.json"))) == len(expected), what="all answered")
        finally:
            core.stop()
            await task
        history.close()

    asyncio.run(run())
    return expected


def test_the_real_reader_accepts_every_response_of_a_batch(node_driver: NodeDriver, tmp_path: Path) -> None:
    expected = _serve_burst(tmp_path)
    folder = session_dir(tmp_path / "root", UUID_SESSION) / "responses"
    files = sorted(str(p) for p in folder.glob("*.json"))
    read = node_driver.run("read_responses.ts", files).json_line()
    assert isinstance(read, dict) and len(read) == len(expected)
    for file, decision in read.items():
        rid = Path(file).stem
        assert decision is not None, f"the package rejected {Path(file).read_bytes()!r}"
        assert decision["responderSessionId"] == UUID_SESSION
        if expected[rid] == "ls":
            assert decision["approved"] is True and decision["state"] == "approved"
        else:
            assert decision["approved"] is False and decision["state"] == "denied_with_reason"
            assert decision["denialReason"]
        if expected[rid] == "rm":
            assert "no rm here" in decision["denialReason"]
