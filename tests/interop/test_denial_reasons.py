"""Every denial this node writes without a person tells the agent why (issue 9 §6).

20.7.3 drops `decidedBy` and relays only `denialReason` ("User denied ... Reason: <it>."). The
responses are produced by a real serving core for each case (fail-safe `unavailable`, `gate_error`
for an unusable file, over-limit), then the real child's gate reads each exact byte string.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import read_response_when_written, request_body, write_request_bytes
from tests.interop.harness import (
    NodeDriver,
    child_ask_args,
    child_env,
    serve,
    wait_until,
)
from tests.interop.ids import CHILD_SESSION, UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ASK: dict[str, Any] = {
    "requestId": "toolu_reason",
    "source": "tool_call",
    "message": "Agent 'Explore' requested bash command 'make deploy'. Allow this command?",
    "surface": "bash",
    "value": "make deploy",
    "toolName": "bash",
}

INTENT: dict[str, Any] = {
    "surface": "bash",
    "boundaryValue": None,
    "requesterCwd": "/w",
    "principal": {"sessionId": "c", "agentName": "Explore"},
}


def _ours(tmp_path: Path) -> dict[str, bytes]:
    """The exact bytes a real core writes for each unattended denial."""
    from core.serving import ServingCore
    from core.vocabulary.asks import DenyingArbiter

    root = tmp_path / "ours"
    cases = {
        "unavailable": json.dumps(request_body("unavailable", UUID_SESSION)).encode(),
        "gate_error": json.dumps(request_body("gate_error", UUID_SESSION, createdAt="soon")).encode(),
        "over_limit": json.dumps(
            request_body("over_limit", UUID_SESSION, accessIntent={**INTENT, "matchValues": ["x"] * 5000})
        ).encode(),
    }

    async def run() -> dict[str, bytes]:
        core = ServingCore(root, tmp_path / "ours-state", DenyingArbiter())
        core.add_session(UUID_SESSION)
        task = asyncio.create_task(core.run())
        try:
            out = {}
            for name, data in cases.items():
                write_request_bytes(root, UUID_SESSION, f"{name}.json", data)
                await read_response_when_written(root, UUID_SESSION, name)
                out[name] = (root / "sessions" / UUID_SESSION / "responses" / f"{name}.json").read_bytes()
            return out
        finally:
            core.stop()
            await task

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["unavailable", "gate_error", "over_limit"])
def test_real_child_passes_our_reason_to_the_agent(
    node_driver: NodeDriver, forwarding_root: Path, tmp_path: Path, workdir: Path, kind: str
) -> None:
    body = _ours(tmp_path)[kind]
    sent = json.loads(body)
    assert sent["state"] == "denied_with_reason" and sent["decidedBy"]["kind"] == kind.replace(
        "over_limit", "gate_error"
    )
    requests = forwarding_root / "sessions" / UUID_SESSION / "requests"
    with node_driver.start(
        "child_ask.ts",
        child_ask_args(forwarding_root, CHILD_SESSION, "Explore", ASK, via_gate=True),
        workdir,
        env=child_env(UUID_SESSION),
    ) as child:
        wait_until(
            lambda: any(requests.glob("*.json")),
            20,
            "the child's request",
            alive=child.proc,
            describe=child.stderr_text,
        )
        [request] = requests.glob("*.json")
        (forwarding_root / "sessions" / UUID_SESSION / "responses" / request.name).write_bytes(body)
        out = child.wait().json_line()
    assert out["decision"]["denialReason"] == sent["denialReason"]
    assert out["outcome"]["action"] == "block"
    assert f"Reason: {sent['denialReason']}." in out["outcome"]["reason"]


def test_serve_fail_safe_reason_reaches_the_real_child(
    node_driver: NodeDriver, forwarding_root: Path, state_dir: Path, workdir: Path
) -> None:
    from core.vocabulary.asks import UNATTENDED_DENIAL

    with serve([UUID_SESSION], forwarding_root, state_dir, "deny", workdir, [f"{UUID_SESSION}.json"]):
        result = node_driver.run(
            "child_ask.ts",
            child_ask_args(forwarding_root, CHILD_SESSION, "Explore", ASK, via_gate=True),
            env=child_env(UUID_SESSION),
        )
    out = result.json_line()
    assert out["decision"]["state"] == "denied_with_reason"
    assert f"Reason: {UNATTENDED_DENIAL}." in out["outcome"]["reason"]
