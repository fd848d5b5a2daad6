"""The at-once lane's judgment (`judgment.decide_ask` with `RecordedAuthority.verdict_of`) decides
exactly as `judge_ask` with `RecordedAuthority.judge` does.

`verdict_of` gives a new ask the compiled reading decides as that reading's `Decided`, without the
`Judgment` the lane drops. Configs, grants and asks are drawn at random (`tests.rules.support`); each
ask is judged as a burst judges it (new, seen once, kept), in two sessions, with a reload between
some: the same response (verdict, `decidedBy`, reason, responder, millisecond) and outcome, or the
same judgment whole when nobody decides; the same grant use counts; and what is kept afterwards
judges alike.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.judgment import decide_ask, judge_ask
from core.testing import ManualClock
from core.vocabulary.asks import Decision, Judgment
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest
from tests.judging.twins import PLAIN_SURFACES, PLAIN_VALUES, judge_alike
from tests.rules.support import (
    ASK_AGENTS,
    ASK_FLOORS,
    ASK_SURFACES,
    ASK_VALUE_LISTS,
    GRANTS,
    HOME,
)


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A request body: with facts (hostile or plain, some with asking units), or without."""
    agent = draw(ASK_AGENTS)
    body: dict[str, Any] = {"id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                            "requesterAgentName": agent, "message": "m"}
    if draw(st.integers(0, 5)) == 0:
        return body  # no facts: the fail-safe's case
    intent: dict[str, Any] = {"surface": draw(ASK_SURFACES | PLAIN_SURFACES),
                              "matchValues": draw(ASK_VALUE_LISTS | PLAIN_VALUES),
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


def _same(lane: Decision | Judgment, judged: Judgment, decision: Decision | None) -> None:
    if decision is not None:
        assert isinstance(lane, Decision)
        assert (lane.response, lane.outcome, lane.carried_to, lane.reply) == (
            decision.response, decision.outcome, decision.carried_to, decision.reply)
        return
    assert isinstance(lane, Judgment)
    assert (lane.verdict, lane.decided_by, lane.reason, lane.config_errors) == (
        judged.verdict, judged.decided_by, judged.reason, judged.config_errors)
    assert list(lane.explanation) == list(judged.explanation)
    assert list(lane.trail) == list(judged.trail)


def _both(lane: RecordedAuthority, whole: RecordedAuthority, parsed: ParsedRequest, session: str,
          clock: ManualClock) -> None:
    judged, decision = judge_ask(whole, parsed, session, clock)
    _same(decide_ask(lane, lane.verdict_of, parsed, session, clock), judged, decision)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), grants=GRANTS, asks=st.lists(bodies(), min_size=1, max_size=8),
       reload_at=st.integers(0, 8))
def test_the_lane_decides_as_the_whole_judgment(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, grants: list[tuple[str, str]],
    asks: list[dict[str, Any]], reload_at: int,
) -> None:
    clock = ManualClock(1_000.0)
    lane, whole = judge_alike(tmp_path_factory.mktemp("judged"), data, grants, asks, reload_at, clock,
                              lambda fast, full, parsed, session: _both(fast, full, parsed, session, clock))
    for body in asks:  # what each kept judges alike
        parsed = parse_request(json.dumps(body).encode())
        _same(lane.judge(parsed, "s1"), whole.judge(parsed, "s1"), None)


def test_a_new_ask_a_rule_decides_makes_no_judgment_and_an_ask_over_the_limit_is_refused(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("plain")
    config = root / "agent" / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {
        "*": "ask", "git *": "allow", "rm *": {"action": "deny", "reason": "not here"}, "mv *": "deny"}}}))
    clock = ManualClock(1_000.0)
    lane = RecordedAuthority(PolicyStore(root / "agent", root / "project", None, home=HOME), clock)
    whole = RecordedAuthority(PolicyStore(root / "agent", root / "project", None, home=HOME), clock)

    def ask(*values: str) -> ParsedRequest:
        return parse_request(json.dumps({
            "id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
            "requesterAgentName": "Explore", "accessIntent": {
                "surface": "bash", "matchValues": list(values), "boundaryValue": None, "requesterCwd": "/w",
                "principal": {"sessionId": "child", "agentName": "Explore"}}}).encode())

    assert not isinstance(lane.verdict_of(ask("git status"), "s"), Judgment)  # the rule's verdict alone
    assert isinstance(lane.verdict_of(ask("ls"), "s"), Judgment)  # asked: the judgment whole
    for parsed in (ask("git log"), ask("rm -rf x"), ask("mv a b"), ask("ls"), ask(*["git x"] * 300)):
        _both(lane, whole, parsed, "s", clock)
    over = decide_ask(lane, lane.verdict_of, ask(*["git x"] * 300), "s", clock)
    assert isinstance(over, Decision) and over.outcome == "over-limit"
