"""Hostile and unlucky request files never stop serving (issue 9 §1): each is answered or quarantined
with its reason, and a control request is served right after it, by the same running core."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.forwarding.liveness import heartbeat_path
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import (
    deep_tree,
    read_response_when_done,
    read_response_when_written,
    request_body,
    session_dir,
    wait_for,
    write_request,
    write_request_bytes,
)
from tests.history.support import Node, S


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    running = Node(tmp_path)
    await running.start(DenyingArbiter())
    yield running
    await running.stop()


async def served_after(node: Node, control: str = "control", kind: str = "unavailable") -> None:
    """The core is still alive: a well-formed request sent afterwards is answered."""
    write_request(node.root, S, control)
    body = await read_response_when_written(node.root, S, control)
    assert body["approved"] is False and body["decidedBy"]["kind"] == kind and body["denialReason"]
    assert not node.task.done()


def body_with(request_id: str, **fields: object) -> bytes:
    return json.dumps(request_body(request_id, S, **fields)).encode()


HOSTILE: list[tuple[str, bytes, str]] = [
    ("src-list", body_with("src-list", source=[]), "source"),
    ("src-dict", body_with("src-dict", source={}), "source"),
    (
        "created-huge",
        body_with("created-huge").replace(b'"createdAt": ', b'"createdAt": ' + b"9" * 400 + b"0"),
        "createdAt",
    ),
    ("deep", b'{"id":"deep","x":' + b"[" * 50_000 + b"]" * 50_000 + b"}", "JSON"),
]


@pytest.mark.parametrize(("stem", "data", "reason"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_hostile_field_is_answered_with_a_reason_and_serving_goes_on(
    node: Node, stem: str, data: bytes, reason: str
) -> None:
    write_request_bytes(node.root, S, f"{stem}.json", data)
    body = await read_response_when_written(node.root, S, stem)
    if body["state"] == "denied_with_reason" and body["decidedBy"]["kind"] == "gate_error":
        assert reason in body["denialReason"]
        await wait_for(
            lambda: any(reason in str(r["reason"]) for r in node.core.quarantine.records()),
            what="the reason kept beside the quarantined file",
        )
    else:  # a tolerated optional field: dropped, the ask served like any other
        assert body["decidedBy"]["kind"] == "unavailable" and body["denialReason"]
    await served_after(node)


@pytest.mark.parametrize("name", ["..json", ".json", "...json"])
async def test_dot_and_empty_ids_are_quarantined_and_serving_goes_on(node: Node, name: str) -> None:
    path = write_request_bytes(node.root, S, name, body_with(name.removesuffix(".json")))
    await wait_for(lambda: not path.exists(), what=f"{name} quarantined")
    await wait_for(
        lambda: any(name in str(r["originalPath"]) for r in node.core.quarantine.records()),
        what="reason kept",
    )
    assert all(p.name != name for p in (session_dir(node.root, S) / "responses").iterdir())
    await served_after(node)


@pytest.mark.parametrize("field", ["requesterAgentName", "value", "message"])
async def test_lone_surrogate_is_a_normal_request(node: Node, field: str) -> None:
    """The real child writes one when its truncation splits a surrogate pair."""
    data = body_with("lone", **{field: "Explore \ud800 half"})
    write_request_bytes(node.root, S, "lone.json", data)
    body = await read_response_when_written(node.root, S, "lone")
    assert body["decidedBy"]["kind"] == "unavailable" and body["state"] == "denied_with_reason"
    await wait_for(lambda: any(r.written for r in node.history.query()), what="history row written")
    [row] = [r for r in node.history.query() if r.request_name == "lone.json"]
    assert row.raw == data and row.outcome == "fail-safe" and row.written == 1
    await served_after(node)


async def test_history_row_sqlite_cannot_encode_still_answers(tmp_path: Path) -> None:
    """Whatever SQLite refuses, the child gets an answer with the reason, and serving goes on."""
    node = Node(tmp_path)
    node.history.close()
    await node.start(DenyingArbiter())
    try:
        write_request(node.root, S, "nohist")
        body = await read_response_when_written(node.root, S, "nohist")
        assert body["state"] == "denied_with_reason" and "history" in body["denialReason"]
        await served_after(node, kind="gate_error")
    finally:
        await node.stop()


@pytest.mark.parametrize("how", ["no-permission", "link-loop"])
async def test_an_unlistable_inbox_is_reported_and_served_again_when_it_heals(
    node: Node, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """Listing fails (EACCES, ELOOP): the session is reported as not served, its heartbeat is
    removed (no child takes it for served), and serving resumes once the folder can be listed."""
    if how == "no-permission" and os.geteuid() == 0:
        pytest.skip("root lists any folder whatever its mode")
    requests = session_dir(node.root, S) / "requests"
    write_request(node.root, S, "before")
    await read_response_when_done(node.root, S, "before")
    caplog.set_level(logging.INFO, "pi_authorizer")
    if how == "no-permission":
        requests.chmod(0o000)
    else:
        shutil.rmtree(requests)
        requests.symlink_to(requests.name)  # a link to itself: every listing fails with ELOOP
    beat = heartbeat_path(node.root, S)
    try:
        await wait_for(lambda: any(e.kind == "not_serving" for e in node.events), what="not_serving event")
        assert "NOT SERVING" in caplog.text
        await wait_for(lambda: not beat.exists(), what="heartbeat removed")
    finally:
        if how == "no-permission":
            requests.chmod(0o700)
        else:
            requests.unlink()
            requests.mkdir()
    await wait_for(lambda: any(e.kind == "serving_again" for e in node.events), what="serving again")
    await wait_for(beat.exists, what="heartbeat back")
    await served_after(node)


async def test_a_deep_folder_is_refused_in_place_and_later_files_are_still_quarantined(node: Node) -> None:
    # Issue 34 finding 6: a 1,000-deep folder `deep.json` broke the prune with RecursionError and
    # every later unusable file was "left in place and ignored".
    with deep_tree(session_dir(node.root, S) / "requests" / "deep.json", 1_000):
        await wait_for(lambda: any("refused in place" in str(r.get("leftInPlace"))
                                   for r in node.core.quarantine.records()),
                       what="the folder's reason, the folder left in place")
        node.core.quarantine.prune()
        write_request_bytes(node.root, S, "junk.json", b"{")
        await wait_for(lambda: not (session_dir(node.root, S) / "requests" / "junk.json").exists(),
                       what="a later unusable file moved out")
        assert (session_dir(node.root, S) / "requests" / "deep.json").is_dir()
        held = [p for folder in (node.state / "quarantine").iterdir() for p in folder.iterdir()]
        assert held and not any(p.is_dir() for p in held)
        await served_after(node)
