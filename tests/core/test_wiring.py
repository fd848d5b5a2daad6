"""`core.wiring` builds the whole node: its rules judge, its terminal takes the rest, its ledger records."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from core.clock import SYSTEM_CLOCK, Clock
from core.history import HistoryStore
from core.seams import Seams
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from core.wiring import NodeOptions, build_attended_node, build_node
from tests.helpers import read_response_when_written, wait_for, write_request

S = "019ff96b-0000-7000-8000-aaaaaaaaaaaa"


def options(tmp_path: Path, clock: Clock = SYSTEM_CLOCK) -> NodeOptions:
    config = tmp_path / "agent" / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"git status *": "allow"}}}))
    return NodeOptions(tmp_path / "root", tmp_path / "state", tmp_path / "agent", tmp_path / "project",
                       seams=Seams(clock=clock))


def intent(command: str) -> dict[str, object]:
    return {"surface": "bash", "matchValues": [command], "boundaryValue": None, "requesterCwd": "/repo",
            "principal": {"sessionId": "child", "agentName": "Explore"}}


async def test_a_headless_node_judges_by_rule_denies_the_rest_and_records_both(tmp_path: Path) -> None:
    history = HistoryStore.in_state_dir(tmp_path / "state")
    node = build_node(options(tmp_path), history, DenyingArbiter())
    assert node.core.judge is node.authority and node.history is history
    node.core.add_session(S)
    serving = asyncio.create_task(node.core.run())
    try:
        write_request(node.core.root, S, "ok", accessIntent=intent("git status --short"))
        write_request(node.core.root, S, "no", accessIntent=intent("rm -rf /"))
        assert (await read_response_when_written(node.core.root, S, "ok"))["state"] == "approved"
        assert (await read_response_when_written(node.core.root, S, "no"))["state"] == "denied_with_reason"
        await wait_for(lambda: len(history.query()) == 2, what="two history rows")
    finally:
        node.core.stop()
        await asyncio.wait_for(serving, 10)


async def test_an_attended_node_hands_the_rest_to_a_person_who_records_grants_here(tmp_path: Path) -> None:
    clock = ManualClock()
    node = build_attended_node(options(tmp_path, clock), None)
    person = node.person
    assert node.core.arbiter is person and person.grants is node.authority and person.clock is clock
    assert node.core.judge is node.authority and node.history is None
    node.core.add_session(S)
    serving = asyncio.create_task(node.core.run())
    try:
        write_request(node.core.root, S, "ask", accessIntent=intent("make deploy"))
        await wait_for(lambda: len(person.pending()) == 1, what="the ask reaches the person")
        decided = await person.approve_once(person.pending()[0].key)
        assert decided.response.responded_at == int(clock.wall() * 1000)
        assert (await read_response_when_written(node.core.root, S, "ask"))["state"] == "approved"
    finally:
        node.core.stop()
        await asyncio.wait_for(serving, 10)
