"""A real serving process killed at each stage of answering, then restarted: every ask answered exactly
once, and a verdict the killed run recorded but never published is reported `answered` when the
restart publishes it, once, so observers (the app's history, its log) hear of every answer written.

The kill comes through the core's explicit `fault` seam (`tests/history/crash_child.py` exits with
`os._exit(137)`: no cleanup, no flush, like SIGKILL) at an exact stage of a batch; the restart runs
the production `serve` (or, for the many generated cases, a serving core in this process whose
events are collected).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.forwarding.liveness import heartbeat_path
from core.history import HistoryRow, HistoryStore
from core.serving.publisher import CHECKPOINTS
from core.vocabulary.asks import AskKey, DenyingArbiter
from core.wire.response import encode_response
from tests.helpers import poll_until, response_path, session_dir, wait_for, write_request, write_request_bytes
from tests.history.support import ALLOW_LS, Node, S, intent, run_until_killed, serve

REPO = Path(__file__).resolve().parents[2]






def serving_pid(root: Path) -> int | None:
    """The pid in the session's heartbeat (the killed run leaves its own behind)."""
    try:
        pid = json.loads(heartbeat_path(root, S).read_text()).get("pid")
    except (OSError, ValueError):
        return None
    return pid if isinstance(pid, int) else None


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(10)


# What must be on disk, and in the history, right after the kill at each stage (one request).
AFTER_CRASH = {
    "arrived": {"request": True, "response": False, "verdict": False},
    "recorded": {"request": True, "response": False, "verdict": True},
    "staged": {"request": True, "response": False, "verdict": True},
    "durable": {"request": True, "response": False, "verdict": True},
    "linked": {"request": True, "response": True, "verdict": True},
    "marked": {"request": True, "response": True, "verdict": True},
    "deleted": {"request": False, "response": True, "verdict": True},
}


@pytest.mark.parametrize("staging", ["anonymous", "named"])
@pytest.mark.parametrize("stage", list(AFTER_CRASH))
def test_killed_at_each_stage_answers_once_after_restart(tmp_path: Path, stage: str, staging: str) -> None:
    request = write_request(tmp_path / "root", S, "r1")
    response = response_path(tmp_path / "root", S, "r1")
    first = run_until_killed(tmp_path, stage, staging)
    assert first.returncode == 137, first.stderr

    expected = AFTER_CRASH[stage]
    assert (request.exists(), response.exists()) == (expected["request"], expected["response"])
    history = HistoryStore.in_state_dir(tmp_path / "state")
    rows = history.query()
    assert len(rows) <= 1  # an arrival is written with its verdict, or a moment after it was seen
    assert any(row.verdict is not None for row in rows) == expected["verdict"]
    published = response.read_bytes() if response.exists() else None
    recorded = rows[0].response if rows else None
    history.close()

    second = serve(tmp_path)
    try:
        poll_until(lambda: serving_pid(tmp_path / "root") == second.pid)
        # A stop is honoured during the first scan too (what it leaves stays for the next start):
        # the restart is stopped once it has answered, and any second answer would be on disk then.
        poll_until(lambda: response.exists() and not request.exists(), what="the restart's answer")
    finally:
        stop(second)
    assert response.exists() and not request.exists()

    body = response.read_bytes()
    if published is not None:
        assert body == published  # never rewritten
    if recorded is not None:
        assert body == recorded  # the verdict recorded before the kill, not a second judgment
    leftovers = sorted(p.name for p in (session_dir(tmp_path / "root", S) / "responses").iterdir())
    assert leftovers == ["r1.json"]  # the killed run's temp files are removed too
    history = HistoryStore.in_state_dir(tmp_path / "state")
    [row] = history.query()
    assert (row.outcome, row.verdict, row.written) == ("fail-safe", "denied_with_reason", 1)
    assert row.response == body
    assert row.ended_at is not None


def test_the_republish_window_is_bounded_to_the_same_bytes_once(tmp_path: Path) -> None:
    """The one window left (documented in docs/design/reliability.md): killed after the response is linked
    and before the history notes it, while the child consumes the response in that instant. The
    restart cannot tell "never linked" from "linked and consumed", so it publishes the RECORDED bytes
    once more: the same verdict, never a new judgment, and the request is then removed."""
    request = write_request(tmp_path / "root", S, "r1")
    response = response_path(tmp_path / "root", S, "r1")
    first = run_until_killed(tmp_path, "linked")
    assert first.returncode == 137, first.stderr
    published = response.read_bytes()
    response.unlink()  # the child read it and removed it; its request is still there
    second = serve(tmp_path)
    try:
        poll_until(lambda: response.exists() and not request.exists())
    finally:
        stop(second)
    assert response.read_bytes() == published
    # The request is gone with this publication, so nothing can be published a third time.
    assert sorted(p.name for p in response.parent.iterdir()) == ["r1.json"]
    history = HistoryStore.in_state_dir(tmp_path / "state")
    [row] = history.query()
    assert (row.written, row.response) == (1, published)


KINDS = st.sampled_from(["allowed", "fail-safe", "hostile"])


def write_case(root: Path, kinds: list[str]) -> tuple[list[str], list[str]]:
    """Requests of each kind: a rule allows it, none applies (fail-safe denial), or unusable."""
    valid, hostile = [], []
    for i, kind in enumerate(kinds):
        rid = f"c{i:03d}"
        if kind == "allowed":
            write_request(root, S, rid, accessIntent=intent("bash", f"ls {rid}"))
        elif kind == "fail-safe":
            write_request(root, S, rid)
        else:
            write_request_bytes(root, S, f"{rid}.json", b'{"id": "' + rid.encode() + b'", "createdAt": "no"}')
            hostile.append(rid)
            continue
        valid.append(rid)
    return valid, hostile


def responses_on_disk(root: Path) -> dict[str, bytes]:
    folder = session_dir(root, S) / "responses"
    return {p.name.removesuffix(".json"): p.read_bytes() for p in folder.iterdir() if p.suffix == ".json"}


def verdict_rows(history: HistoryStore) -> dict[str, HistoryRow]:
    rows = [row for row in history.query() if row.verdict is not None]
    counted = Counter(row.request_id for row in rows)
    assert all(n == 1 for n in counted.values()), f"a request recorded twice: {counted}"
    return {row.request_id or "": row for row in rows}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(KINDS, min_size=1, max_size=24),
    stage=st.sampled_from(CHECKPOINTS),
    staging=st.sampled_from(["anonymous", "named"]),
)
def test_a_batch_killed_at_any_stage_is_answered_exactly_once(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str], stage: str, staging: str
) -> None:
    tmp = tmp_path_factory.mktemp("crash")
    if all(k == "hostile" for k in kinds):
        kinds = [*kinds, "fail-safe"]  # a batch with an answer to publish, so every stage is reached
    if stage == "half-linked" and sum(k != "hostile" for k in kinds) < 2:
        kinds = [*kinds, "allowed", "fail-safe"]
    node = Node(tmp, ALLOW_LS)
    valid, hostile = write_case(node.root, kinds)
    (tmp / "agent" / "extensions" / "pi-permission-system" / "config.json").write_text(
        json.dumps({"permission": ALLOW_LS})
    )
    killed = run_until_killed(tmp, stage, staging)
    assert killed.returncode == 137, killed.stderr

    # Recorded before visible: every verdict on disk is one the history holds, byte for byte (an
    # unusable file is answered with a gate-error denial and recorded as quarantined, no verdict).
    seen = responses_on_disk(node.root)
    rows = verdict_rows(node.history)
    for rid in valid:
        if rid in seen:
            assert rid in rows and rows[rid].response == seen[rid], rid

    asyncio.run(restart_and_drain(node, valid))

    published = responses_on_disk(node.root)
    assert set(valid) <= set(published)  # nothing lost
    for rid, body in seen.items():
        assert published[rid] == body  # never rewritten
    rows = verdict_rows(node.history)
    assert sorted(rows) == sorted(valid)
    for i, kind in enumerate(kinds):
        rid = f"c{i:03d}"
        if kind == "hostile":
            assert rid not in published or json.loads(published[rid])["approved"] is False
            continue
        row = rows[rid]
        assert row.response == published[rid] and row.written == 1
        assert json.loads(published[rid])["approved"] is (kind == "allowed")
    requests = session_dir(node.root, S) / "requests"
    assert sorted(p.name for p in requests.iterdir()) == []  # answered, or quarantined with a reason
    # Every unusable file is kept in the quarantine (its reason too, unless the kill fell between the
    # quarantine's move and its reason file: the file is kept either way).
    kept = [p.name for p in (node.state / "quarantine").rglob("*")]
    assert all(any(name.endswith(f"-{rid}.json") for name in kept) for rid in hostile), kept
    node.history.close()


async def restart_and_drain(node: Node, valid: list[str]) -> None:
    await node.start(DenyingArbiter())
    try:
        requests = session_dir(node.root, S) / "requests"
        await wait_for(
            lambda: not [p for p in requests.iterdir() if p.suffix == ".json"]
            and set(responses_on_disk(node.root)) >= set(valid),
            what="every request answered or set aside",
        )
        await wait_for(
            lambda: all(r.written == 1 for r in verdict_rows(node.history).values()), what="all noted"
        )
    finally:
        await node.stop()


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
