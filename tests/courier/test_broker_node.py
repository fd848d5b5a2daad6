"""Whole nodes built by `core.wiring` around a real nats-server: a courier node (`--forward-to
nats://`) carries what its rules leave to the broker; an attended node (`--broker`) judges it with
its own rules first, then puts it before its person, whose verdict the courier's child reads."""

from __future__ import annotations

import json
from pathlib import Path

from core.courier.targets import parse_target
from core.seams import Seams
from core.vocabulary.asks import DenyingArbiter
from core.wiring import NodeOptions, build_attended_node, build_node
from tests.helpers import (
    NatsServer,
    bash_intent,
    read_response_when_done,
    serving_session,
    wait_for,
    write_request,
)

C = "019ff96a-cccc-7000-8000-000000000031"
A = "019ff96a-aaaa-7000-8000-000000000032"


def _options(tmp_path: Path, name: str, *, forward: str | None = None, broker: str | None = None,
             rules: dict[str, str] | None = None) -> NodeOptions:
    agent = tmp_path / f"agent-{name}"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": rules or {}}}))
    return NodeOptions(tmp_path / f"root-{name}", tmp_path / f"state-{name}", agent, tmp_path / "project",
                       seams=Seams(), forward_to=parse_target(forward) if forward else None,
                       broker=broker, node_name=f"node-{name}")


async def test_the_approvers_rules_then_its_person_decide_what_the_courier_carried(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    for name in ("c", "a"):
        (tmp_path / f"root-{name}").mkdir()
    courier = build_node(_options(tmp_path, "c", forward=nats_server.url, rules={"git status *": "allow"}),
                         None, DenyingArbiter())
    approver = build_attended_node(_options(tmp_path, "a", broker=nats_server.url, rules={"rm *": "deny"}),
                                   None)
    root = tmp_path / "root-c"
    async with serving_session(approver.core, A), serving_session(courier.core, C):
        write_request(root, C, "local", accessIntent=bash_intent("git status --short"))
        assert (await read_response_when_done(root, C, "local"))["decidedBy"]["kind"] == "rule"
        write_request(root, C, "ruled", accessIntent=bash_intent("rm -rf build"))
        ruled = await read_response_when_done(root, C, "ruled")
        assert ruled["approved"] is False and ruled["decidedBy"]["kind"] == "forwarded"
        assert ruled["decidedBy"]["decision"]["kind"] == "rule"  # the approver's rule, relayed
        write_request(root, C, "asked", accessIntent=bash_intent("make deploy"))
        person = approver.person
        await wait_for(lambda: len(person.pending()) == 1, what="the carried ask before the person")
        [ask] = person.pending()
        assert ask.key.session_id.startswith("nats:") and ask.key.session_id.endswith(f"/{C}")
        assert ask.parsed.facts is not None and ask.parsed.facts.match_values == ("make deploy",)
        await person.approve_once(ask.key)
        answer = await read_response_when_done(root, C, "asked")
        assert answer["approved"] is True
        assert answer["responderSessionId"] == C
        assert answer["decidedBy"]["kind"] == "forwarded"
        assert answer["decidedBy"]["decision"]["kind"] == "user"  # the approver's person, relayed


async def test_a_broker_out_of_reach_at_start_does_not_stop_the_nodes_own_inboxes(tmp_path: Path) -> None:
    from tui.demo.nats_server import free_port

    (tmp_path / "root-a").mkdir()
    node = build_node(_options(tmp_path, "a", broker=f"nats://127.0.0.1:{free_port()}",
                               rules={"git status *": "allow"}), None, DenyingArbiter())
    root = tmp_path / "root-a"
    async with serving_session(node.core, A):
        write_request(root, A, "own", accessIntent=bash_intent("git status"))
        assert (await read_response_when_done(root, A, "own"))["approved"] is True
