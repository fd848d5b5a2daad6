"""A real serving process killed between linking a response and noting it (issue 32, finding 3): its
child reads the answer and removes both files before the node restarts. The restart closes that row
from what the inbox shows, and a request replayed under the answered id is never answered again."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from core.forwarding.inbox import SessionInbox
from core.forwarding.liveness import heartbeat_path
from core.history import HistoryStore
from tests.helpers import poll_until, response_path, session_dir, write_request_bytes
from tests.history.support import S, run_until_killed, serve


def serving_pid(root: Path) -> int | None:
    try:
        pid = json.loads(heartbeat_path(root, S).read_text()).get("pid")
    except (OSError, ValueError):
        return None
    return pid if isinstance(pid, int) else None


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(10)


def test_a_row_left_unnoted_by_a_kill_is_closed_and_its_id_never_answered_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    request = session_dir(root, S) / "requests" / "r1.json"
    raw = json.dumps({"id": "r1", "createdAt": 1_800_000_000_000, "requesterSessionId": "child",
                      "targetSessionId": S, "requesterAgentName": "Explore", "source": "tool_call",
                      "surface": "bash", "value": "ls r1"}).encode()
    write_request_bytes(root, S, "r1.json", raw)
    response = response_path(root, S, "r1")
    killed = run_until_killed(tmp_path, "linked")
    assert killed.returncode == 137, killed.stderr
    answered = response.read_bytes()
    response.unlink()  # the child reads its answer and removes both files, as it does
    request.unlink()

    second = serve(tmp_path)
    try:
        poll_until(lambda: serving_pid(root) == second.pid, what="the restarted node serving")
        history = HistoryStore.in_state_dir(tmp_path / "state")
        try:
            [row] = history.query()
            assert row.response == answered and row.ended_at is not None  # closed, not left open
            assert row.written is None  # its child read it or gave up: not known which
        finally:
            history.close()
        write_request_bytes(root, S, "r1.json", raw)  # the same bytes, replayed under the answered id
        quarantine = tmp_path / "state" / "quarantine"
        poll_until(lambda: not request.exists(), what="the replay set aside")
    finally:
        stop(second)
    assert not response.exists()  # never answered a second time
    assert any(p.name.endswith("-r1.json") for p in quarantine.rglob("*"))
    history = HistoryStore.in_state_dir(tmp_path / "state")
    try:
        rows = history.query()
        [replay] = [r for r in rows if r.outcome == "quarantined"]
        assert replay.reason is not None and "already answered by this node" in replay.reason
        assert [r.response for r in rows if r.verdict is not None] == [answered]
    finally:
        history.close()


def test_a_row_left_unnoted_whose_response_is_still_there_is_closed_delivered(tmp_path: Path) -> None:
    root = tmp_path / "root"
    request = write_request_bytes(root, S, "r2.json", json.dumps({
        "id": "r2", "createdAt": 1_800_000_000_000, "requesterSessionId": "child", "targetSessionId": S,
        "requesterAgentName": "Explore", "source": "tool_call", "surface": "bash", "value": "ls r2",
    }).encode())
    response = response_path(root, S, "r2")
    killed = run_until_killed(tmp_path, "linked")
    assert killed.returncode == 137, killed.stderr
    request.unlink()  # the child removed its request; its answer is still there to read
    history = HistoryStore.in_state_dir(tmp_path / "state")
    try:
        inbox = SessionInbox(root, S)
        assert history.reconcile_open(S, set(), delivered=inbox.response_is) == 1
        [row] = history.query()
        assert (row.written, row.response) == (1, response.read_bytes()) and row.ended_at is not None
    finally:
        history.close()
