"""Whole nodes built by `core.wiring` with `--forward-to session:P`: the courier node C keeps its own
rules (they resolve locally), its chain may deny or defer but never allow, the rest is carried to P's
node, and both histories say what happened; in the app the person at C decides what P cannot."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from core.clock import SYSTEM_CLOCK, Clock
from core.courier.arbiter import CourierArbiter
from core.courier.targets import Target
from core.history import HistoryStore
from core.judging.links import CommandLink
from core.person import Person
from core.seams import Seams
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from core.wiring import NodeOptions, build_attended_node, build_node
from tests.helpers import (
    bash_intent,
    read_response_when_done,
    serving_session,
    session_dir,
    wait_for,
    write_request,
)

C = "019ff96a-cccc-7000-8000-000000000011"
P = "019ff96a-pppp-7000-8000-000000000022"


def _options(tmp_path: Path, name: str, clock: Clock = SYSTEM_CLOCK, forward: bool = False,
             links: tuple[CommandLink, ...] = ()) -> NodeOptions:
    agent = tmp_path / f"agent-{name}"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"git status *": "allow", "rm *": "deny"}}}))
    return NodeOptions(tmp_path / "root", tmp_path / f"state-{name}", agent, tmp_path / "project",
                       links=links, seams=Seams(clock=clock),
                       forward_to=Target("session", P) if forward else None, node_name=f"node-{name}")


def _allowing_link() -> CommandLink:
    script = "import sys; sys.stdin.read(); print('{\"verdict\": \"allow\"}')"
    return CommandLink("allows", (sys.executable, "-c", script))


async def test_the_rest_is_carried_to_p_and_both_histories_say_who_decided_where(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    history_c = HistoryStore.in_state_dir(tmp_path / "state-c")
    history_p = HistoryStore.in_state_dir(tmp_path / "state-p")
    courier = build_node(_options(tmp_path, "c", forward=True, links=(_allowing_link(),)), history_c,
                         DenyingArbiter())
    parent = build_attended_node(_options(tmp_path, "p"), history_p)
    assert isinstance(courier.core.arbiter, CourierArbiter)
    async with serving_session(parent.core, P), serving_session(courier.core, C):
        write_request(tmp_path / "root", C, "local", accessIntent=bash_intent("git status --short"))
        assert (await read_response_when_done(tmp_path / "root", C, "local"))["decidedBy"]["kind"] == "rule"
        write_request(tmp_path / "root", C, "refused", accessIntent=bash_intent("rm -rf build"))
        refused = await read_response_when_done(tmp_path / "root", C, "refused")
        assert (refused["approved"], refused["decidedBy"]["kind"]) == (False, "rule")
        write_request(tmp_path / "root", C, "carried", accessIntent=bash_intent("make deploy"))
        person: Person = parent.person
        await wait_for(lambda: len(person.pending()) == 1, what="the ask at P (the link's allow capped)")
        await person.deny(person.pending()[0].key, "deploys wait for Monday")
        answer = await read_response_when_done(tmp_path / "root", C, "carried")
        assert answer["denialReason"] == "deploys wait for Monday"
        await wait_for(lambda: len([r for r in history_c.query() if r.written]) == 3, what="C's history")
        await wait_for(lambda: len([r for r in history_p.query() if r.written]) == 1, what="P's history")
    rows_c = {row.request_name: row for row in history_c.query()}
    assert rows_c["local.json"].outcome == rows_c["refused.json"].outcome == "rule"
    carried = rows_c["carried.json"]
    assert carried.outcome == "courier"
    assert carried.decider == f"carried to session:{P}, decided there by person (dialog)"
    [row_p] = history_p.query()
    assert row_p.outcome == "user" and row_p.raw is not None and b'"hops":[{"host":' in row_p.raw
    assert list((session_dir(tmp_path / "root", P) / "requests").iterdir()) == []


async def test_in_the_app_the_person_here_decides_what_the_target_cannot(tmp_path: Path) -> None:
    clock = ManualClock()
    (tmp_path / "root").mkdir()
    node = build_attended_node(_options(tmp_path, "c", clock, forward=True), None)
    async with serving_session(node.core, C):
        write_request(tmp_path / "root", C, "ask", accessIntent=bash_intent("make deploy"))
        requests_p = session_dir(tmp_path / "root", P) / "requests"
        await wait_for(lambda: requests_p.exists() and any(requests_p.iterdir()), what="the ask carried to P")
        assert node.person.pending() == []
        clock.advance(2.0)  # nobody serves P: after the grace the person here is asked
        await wait_for(lambda: len(node.person.pending()) == 1, what="the ask at the person here")
        await node.person.approve_once(node.person.pending()[0].key)
        answer = await read_response_when_done(tmp_path / "root", C, "ask")
        assert answer["approved"] is True and answer["decidedBy"]["kind"] == "user"
        assert list(requests_p.iterdir()) == []
