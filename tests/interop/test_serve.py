"""The real 20.7.3 child against `pi-authorizer serve`."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.interop.harness import (
    NodeDriver,
    ScriptResult,
    child_ask_args,
    child_env,
    read_json_file,
    serve,
    stop_serve,
    wait_until,
)
from tests.interop.ids import CHILD_SESSION, ODD_SESSION, ODD_SESSION_FOLDER, UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ASK: dict[str, Any] = {
    "requestId": "toolu_01AbCdEf",
    "source": "tool_call",
    "message": "Agent 'Explore' requested bash command 'git push origin main' (matched 'git *'). "
    "Allow this command?",
    "surface": "bash",
    "value": "git push origin main",
    "toolName": "bash",
    "sessionApproval": {"surface": "bash", "patterns": ["git push *"]},
}


def _event(result: ScriptResult | list[dict[str, Any]], name: str) -> dict[str, Any]:
    events = result.log_events() if isinstance(result, ScriptResult) else result
    found = [e for e in events if e.get("event") == name]
    assert found, f"no {name!r} event in {events}"
    return found[-1]


@pytest.mark.parametrize(
    ("served_ids", "target", "folder"),
    [
        ([UUID_SESSION], UUID_SESSION, UUID_SESSION),
        ([UUID_SESSION, ODD_SESSION], ODD_SESSION, ODD_SESSION_FOLDER),
    ],
    ids=["one-session", "second-of-two-odd-id"],
)
def test_real_child_is_denied_by_serve_on_ask_deny(
    node_driver: NodeDriver,
    forwarding_root: Path,
    state_dir: Path,
    workdir: Path,
    served_ids: list[str],
    target: str,
    folder: str,
) -> None:
    from core.disk.paths import encode_session_id

    beats = [f"{encode_session_id(sid)}.json" for sid in served_ids]
    with serve(served_ids, forwarding_root, state_dir, "deny", workdir, beats) as served:
        result = node_driver.run(
            "child_ask.ts",
            child_ask_args(forwarding_root, CHILD_SESSION, "Explore", ASK),
            env=child_env(target),
        )
        decision = result.json_line()
        created = _event(result, "forwarded_permission.request_created")
        request_id = created["requestId"]
        served.wait_for_log(request_id)

    # 20.7.3 drops decidedBy: the fail-safe denial carries its reason in `denialReason`.
    from core.vocabulary.asks import UNATTENDED_DENIAL

    assert decision["approved"] is False
    assert decision["state"] == "denied_with_reason"
    assert decision["denialReason"] == UNATTENDED_DENIAL
    # It was a real response from our node, not the child's own fallback denial.
    received = _event(result, "forwarded_permission.response_received")
    assert received["requestId"] == request_id
    assert received["responderSessionId"] == target
    assert received["approved"] is False
    assert created["targetSessionId"] == target
    session_root = forwarding_root / "sessions" / folder
    assert Path(created["requestPath"]).parent == session_root / "requests"
    # Both sides cleaned up: nothing of this session is left in the inbox.
    assert not (session_root / "requests").exists()


def test_real_child_request_is_read_by_our_parser(
    node_driver: NodeDriver, forwarding_root: Path, state_dir: Path, workdir: Path
) -> None:
    from core.wire.reader import parse_request

    requests_dir = forwarding_root / "sessions" / ODD_SESSION_FOLDER / "requests"
    with (
        serve(
            [ODD_SESSION], forwarding_root, state_dir, "leave", workdir, [f"{ODD_SESSION_FOLDER}.json"]
        ) as served,
        node_driver.start(
            "child_ask.ts",
            child_ask_args(forwarding_root, CHILD_SESSION, "Explore", ASK),
            workdir,
            env=child_env(ODD_SESSION),
        ) as child,
    ):
        wait_until(
            lambda: any(requests_dir.glob("*.json")),
            20,
            f"the child's request in {requests_dir}",
            alive=child.proc,
            describe=child.stderr_text,
        )
        [path] = requests_dir.glob("*.json")
        request_id = path.name.removesuffix(".json")
        served.wait_for_log(request_id)
        # `leave` leaves it in the inbox: the child is still waiting.
        assert path.is_file()
        assert child.proc.poll() is None
        raw_bytes = path.read_bytes()
        theirs = node_driver.run("read_request.ts", [str(path)]).json_line()
    # The child was killed on leaving the block; its request stays behind.

    raw = json.loads(raw_bytes)
    assert theirs == raw  # the package's reader keeps every field its writer wrote
    assert not raw_bytes.endswith(b"\n")
    parsed = parse_request(raw_bytes)
    assert parsed.dropped == {}
    req = parsed.request
    assert req.id == request_id == raw["id"]
    assert req.created_at == raw["createdAt"]
    assert req.requester_session_id == CHILD_SESSION
    assert req.target_session_id == ODD_SESSION
    assert req.requester_agent_name == "Explore"
    assert req.message == ASK["message"]
    assert req.source == "tool_call"
    assert req.surface == "bash"
    assert req.value == "git push origin main"
    assert req.session_approval is not None
    assert req.session_approval.shape == "legacy"
    assert [(g.surface, g.pattern) for g in req.session_approval.grants] == [("bash", "git push *")]
    assert req.payload is None
    assert req.access_intent is None
    # 20.7.3 mints its own id (`<ms>-<rand8>-<pid>`); it does not adopt the ask's requestId.
    ms, rand, pid = request_id.split("-")
    assert ms.isdigit() and len(rand) <= 8 and pid.isdigit()
    assert request_id != ASK["requestId"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_heartbeat_and_clean_exit(
    forwarding_root: Path, state_dir: Path, workdir: Path, sig: int
) -> None:
    name = f"{ODD_SESSION_FOLDER}.json"
    with serve(
        [ODD_SESSION, UUID_SESSION],
        forwarding_root,
        state_dir,
        "deny",
        workdir,
        [name, f"{UUID_SESSION}.json"],
    ) as served:
        beat = read_json_file(forwarding_root / "serving" / name)
        assert beat["sessionId"] == ODD_SESSION
        assert isinstance(beat["pid"], int) and beat["pid"] > 0
        os.kill(beat["pid"], 0)  # a live process on this host
        assert isinstance(beat["updatedAt"], int | float)
        code = stop_serve(served, sig)
        assert code == 0, served.stderr_text()
        assert not any(p.exists() for p in served.heartbeats)
