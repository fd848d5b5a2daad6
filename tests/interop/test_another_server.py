"""pi's own 20.7.3 in-pi server (`ForwardedRequestServer`, node/serve_reference.ts) answering the
same inbox as `pi-authorizer serve` (issue 21, finding 4).

The reference server approves everything; serve denies (fail-safe, history kept). Children (the
wire's reader side, in threads: write a request, poll for its response, read it, delete it) ask
throughout. Whatever the race, the history never claims a delivered denial whose child read an
approval, and serve's log names the other server.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest

from core.disk.paths import encode_session_id
from tests.helpers import request_body, response_path, write_request_bytes
from tests.interop.harness import NodeDriver, serve, stop_serve, wait_until
from tests.interop.ids import UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ASKS = 24
CHILD_WAIT_S = 20.0


def _child(root: Path, request_id: str, read: dict[str, bytes | None]) -> None:
    """One ask as a child makes it: the request renamed in, its response polled for, read, deleted."""
    intent = {"surface": "bash", "matchValues": [f"ls {request_id}"], "boundaryValue": None,
              "requesterCwd": "/worktree", "principal": {"sessionId": "child", "agentName": "Explore"}}
    body = request_body(request_id, UUID_SESSION, accessIntent=intent)
    write_request_bytes(root, UUID_SESSION, f"{request_id}.json", json.dumps(body).encode())
    path = response_path(root, UUID_SESSION, request_id)
    deadline = time.monotonic() + CHILD_WAIT_S
    while time.monotonic() < deadline:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            time.sleep(0.01)
            continue
        try:
            json.loads(data)
        except ValueError:  # caught between a writer's open and its last byte: not read yet
            time.sleep(0.01)
            continue
        read[request_id] = data
        path.unlink(missing_ok=True)
        (path.parent.parent / "requests" / f"{request_id}.json").unlink(missing_ok=True)
        return
    read[request_id] = None


def _slow_judge() -> str:
    """A chain link taking 0.1-0.4 s (as a person or a remote check would): the other server, polling
    every 250 ms, gets to asks while this node still judges them, so the two really race."""
    script = ("import json, random, sys, time; sys.stdin.read(); time.sleep(random.uniform(0.1, 0.4)); "
              "print(json.dumps({'verdict': 'deny', 'reason': 'slow'}))")
    return f'slow={sys.executable} -c "{script}"'


def _asks(root: Path, prefix: str, count: int, read: dict[str, bytes | None]) -> None:
    children = []
    for n in range(count):
        child = threading.Thread(target=_child, args=(root, f"{prefix}{n:02d}", read))
        child.start()
        children.append(child)
        if n % 3 == 2:
            time.sleep(0.1)  # asks arrive over time, as a busy agent's do (not a timing assert)
    for child in children:
        child.join()


def test_the_real_reference_server_on_the_same_inbox_is_named_and_never_contradicts_the_history(
    node_driver: NodeDriver, forwarding_root: Path, state_dir: Path, workdir: Path
) -> None:
    beat = f"{encode_session_id(UUID_SESSION)}.json"
    read: dict[str, bytes | None] = {}
    with serve([UUID_SESSION], forwarding_root, state_dir, "deny", workdir, [beat],
               ["--link", _slow_judge()]) as served:
        with node_driver.start("serve_reference.ts", [str(forwarding_root), UUID_SESSION], workdir) as other:
            wait_until(lambda: b"ready" in other.stdout_path.read_bytes(), 30,
                       "the reference server to start", alive=other.proc, describe=other.stderr_text)
            other_pid = json.loads(other.stdout_path.read_text().splitlines()[0])["pid"]
            _asks(forwarding_root, "toolu_both", ASKS, read)
            served.wait_for_log(f"another server answers session {UUID_SESSION} (pid {other_pid}")
        # The reference server is gone (killed on leaving its block): this node serves the inbox again.
        served.wait_for_log("is gone: serving it again")
        _asks(forwarding_root, "toolu_after", 3, read)
        assert stop_serve(served) == 0

    assert all(read.values()), f"a child got no answer: {read}"
    after = [json.loads(body or b"{}") for rid, body in read.items() if rid.startswith("toolu_after")]
    assert [body["approved"] for body in after] == [False] * 3  # answered by this node alone again
    with sqlite3.connect(state_dir / "history.sqlite3") as db:
        rows = db.execute("SELECT request_id, verdict, written, outcome FROM asks").fetchall()
    contradicted = [
        (request_id, verdict, outcome, read[request_id])
        for request_id, verdict, written, outcome in rows
        if written and (verdict or "").startswith("denied") and _approved(read.get(request_id))
    ]
    assert contradicted == [], f"history: denied and delivered; the child read an approval: {contradicted}"


def _approved(body: bytes | None) -> bool:
    return body is not None and json.loads(body).get("approved") is True
