"""The at-once lane's one-call judgment (`RecordedAuthority.decided_plain`, `asked_without_facts`, used
in place by `AtOnce.serve`) decides exactly as the uncached judgment: `judge_ask` on an authority fed
alike, then the fail-safe arbiter for what nobody decided.

Configs, grants and asks are drawn at random (`tests.rules.support`), with reloads, grants recorded and
grants revoked between the asks (each ask judged new, seen and kept): the same response (verdict,
`decidedBy`, reason, responder, millisecond) and outcome for every ask decided at once, the same
judgment for every ask left to the route, the same grant use counts. A stale reading (the policy or
the grants before a change) would judge some ask otherwise here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.forwarding.inbox import SessionInbox
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.at_once import AtOnce
from core.serving.intake import FileRead, Intake
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from core.wire.reader import parse_request
from core.wire.request import SessionGrant
from tests.judging.twins import (
    PLAIN_SURFACES,
    PLAIN_VALUES,
    assert_lane_judged_as_whole,
    grant_in_both,
    revoke_first_two,
)
from tests.rules.support import (
    ASK_AGENTS,
    ASK_FLOORS,
    ASK_SURFACES,
    ASK_VALUE_LISTS,
    CONFIG,
    GRANTS,
    HOME,
    hostile_layout,
)

SESSIONS = ("s1", "s2")


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A request body for session `s1` (its id set later): plain facts most often, else hostile facts,
    asking units, a boundary or no facts."""
    agent = draw(ASK_AGENTS | st.just("Explore"))
    body: dict[str, Any] = {"createdAt": 1, "requesterSessionId": "child", "requesterAgentName": agent,
                            "message": "m"}
    if draw(st.integers(0, 4)) == 0:
        return body
    intent: dict[str, Any] = {"surface": draw(PLAIN_SURFACES | ASK_SURFACES),
                              "matchValues": draw(PLAIN_VALUES | ASK_VALUE_LISTS),
                              "boundaryValue": draw(st.none() | st.text(max_size=5)), "requesterCwd": "/w",
                              "principal": {"sessionId": "child", "agentName": agent}}
    floor = draw(ASK_FLOORS)
    if floor is not None:
        intent["floor"] = floor
    if draw(st.integers(0, 7)) == 0:
        units = [{"command": value} for value in intent["matchValues"][:2]]
        intent["askingUnits"] = units or [{"command": "x"}]
    body["accessIntent"] = intent
    return body


#: Between asks: a reload with a new global config, a grant recorded, the oldest grant revoked.
STEPS = st.lists(st.one_of(
    st.tuples(st.just("ask"), bodies()),
    st.tuples(st.just("reload"), CONFIG),
    st.tuples(st.just("grant"), GRANTS.filter(bool).map(lambda grants: grants[0])),
    st.tuples(st.just("revoke"), st.none()),
), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), steps=STEPS)
def test_the_lanes_one_call_judgment_decides_as_the_uncached_one(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, steps: list[tuple[str, Any]],
) -> None:
    root = tmp_path_factory.mktemp("plain")
    layout, rules = data.draw(hostile_layout(root))
    clock = ManualClock(1_000.0)
    lane, whole = (RecordedAuthority(PolicyStore(layout.agent_dir, layout.project, rules, home=HOME,
                                                 accept_widening=True), clock) for _ in range(2))
    arbiter = DenyingArbiter(clock)
    inbox = SessionInbox(Path("/nonexistent"), "s1")
    asked = 0
    for kind, value in steps:
        if kind == "reload":
            fresh = layout.global_config.with_suffix(".new")
            fresh.write_text(json.dumps(value))
            os.replace(fresh, layout.global_config)
            assert lane.store.reload_if_changed() == whole.store.reload_if_changed()
        elif kind == "grant":
            grant_in_both((lane, whole), SESSIONS, value)
        elif kind == "revoke":
            revoke_first_two((lane, whole))
        else:
            for session in SESSIONS:
                at_once = AtOnce(session, lane, clock, 60_000, arbiter.decide_at_once)
                for _ in range(3):  # new, seen once, kept; two asks in one intake (one millisecond)
                    asked += 1
                    clock.advance(0.0007)
                    reads = []
                    for n in range(2):
                        body = {**value, "id": f"r{asked}-{n}", "targetSessionId": session}
                        raw = json.dumps(body).encode()
                        reads.append((f"r{asked}-{n}.json", FileRead(raw=raw, parsed=parse_request(raw),
                                                                     identity=(1, 2, 3))))
                    served = at_once.serve(inbox, Intake(reads, frozenset(), {}))
                    assert_lane_judged_as_whole(served, reads, whole, session, clock, arbiter)
    assert [g.decided for g in lane.list_grants()] == [g.decided for g in whole.list_grants()]


def test_the_one_call_judgment_is_given_only_under_the_reading_last_used(tmp_path: Path) -> None:
    """`decided_plain` says a verdict only under the very policy and grants `verdict_of` last judged
    with; after a grant or a reload it defers (None) until `verdict_of` has judged under the new ones."""
    config = tmp_path / "agent" / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"*": "ask", "git *": "allow"}}}))
    authority = RecordedAuthority(PolicyStore(tmp_path / "agent", tmp_path / "project", None, home=HOME))

    def ask(value: str, agent: str = "Explore") -> Any:
        return parse_request(json.dumps({
            "id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
            "requesterAgentName": agent, "accessIntent": {
                "surface": "bash", "matchValues": [value], "boundaryValue": None, "requesterCwd": "/w",
                "principal": {"sessionId": "child", "agentName": agent}}}).encode())

    git = ask("git status").request.access_intent
    assert authority.decided_plain(git, "s") is None  # nothing judged yet
    for _ in range(2):  # (the first composes the policy: the second judges under it as composed)
        authority.verdict_of(ask("git log"), "s")
    decided = authority.decided_plain(git, "s")
    assert decided is not None and decided.verdict == "allow"
    assert authority.decided_plain(ask("ls").request.access_intent, "s") is None  # an ask: `verdict_of` tells
    assert authority.decided_plain(ask("git status", "other").request.access_intent, "s") is None
    assert authority.decided_plain(git, "s2") is None  # another session's grants
    authority.record("s", [SessionGrant(surface="bash", pattern="ls")], "Explore")
    assert authority.decided_plain(git, "s") is None  # the grants changed
    authority.verdict_of(ask("git log"), "s")
    assert authority.decided_plain(ask("ls").request.access_intent, "s") is not None  # the grant decides
    assert [entry.decided for entry in authority.list_grants()] == [1]
    config.write_text(json.dumps({"permission": {"bash": {"*": "ask", "git *": "deny"}}}))
    assert authority.store.reload_if_changed()
    assert authority.decided_plain(git, "s") is None  # the config changed
    for _ in range(2):
        authority.verdict_of(ask("git log"), "s")
    denied = authority.decided_plain(git, "s")
    assert denied is not None and denied.verdict == "deny"
    assert authority.asked_without_facts("Explore") and not authority.asked_without_facts("other")
