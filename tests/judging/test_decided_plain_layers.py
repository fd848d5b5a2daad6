"""The at-once lane's one-call judgment (`RecordedAuthority.decided_plain`, `asked_without_facts`, in
place in `AtOnce.serve`) against the uncached judgment (`judge_ask` on an authority fed alike, then the
fail-safe), under the changes `tests/judging/test_decided_plain.py` does not make: the project layer
(also unreadable) and agent files written, made and removed, widening changes held and then accepted
or declined (no `accept_widening`), and asks of several agents in one intake (one agent's reading
must never judge another's ask).
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
from tests.judging.twins import (
    PLAIN_SURFACES,
    PLAIN_VALUES,
    assert_lane_judged_as_whole,
    grant_in_both,
    revoke_first_two,
)
from tests.rules.support import AGENT_RULES, ASK_FLOORS, ASK_VALUE_LISTS, CONFIG, GRANTS, HOME, Layout

SESSIONS = ("s1", "s2")
AGENTS = st.sampled_from(["Explore", "other", "sub/x", ""])


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A request body (its id and session set later): plain facts most often, else none."""
    agent = draw(AGENTS)
    body: dict[str, Any] = {"createdAt": 1, "requesterSessionId": "child", "requesterAgentName": agent,
                            "message": "m"}
    if draw(st.integers(0, 5)) == 0:
        return body
    values = draw(PLAIN_VALUES | ASK_VALUE_LISTS)
    intent: dict[str, Any] = {"surface": draw(PLAIN_SURFACES), "matchValues": values, "boundaryValue": None,
                              "requesterCwd": "/w", "principal": {"sessionId": "child", "agentName": agent}}
    floor = draw(ASK_FLOORS)
    if floor is not None:
        intent["floor"] = floor
    body["accessIntent"] = intent
    return body


STEPS = st.lists(st.one_of(
    st.tuples(st.just("ask"), st.lists(bodies(), min_size=1, max_size=3)),
    st.tuples(st.just("global"), CONFIG),
    st.tuples(st.just("project"), CONFIG | st.just("{not json")),
    st.tuples(st.just("agent"), st.tuples(st.sampled_from(["Explore", "other"]), st.none() | AGENT_RULES)),
    st.tuples(st.just("accept"), st.none()),
    st.tuples(st.just("decline"), st.none()),
    st.tuples(st.just("grant"), GRANTS.filter(bool).map(lambda grants: grants[0])),
    st.tuples(st.just("revoke"), st.none()),
), min_size=1, max_size=14)


def _replace(path: Path, text: str) -> None:
    """`text` written under `path` as a new file (another inode, as an editor's save)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.with_suffix(".new")
    fresh.write_text(text)
    os.replace(fresh, path)


def _agent_text(rules: list[tuple[str, str, str]]) -> str:
    lines = "".join(f"  {s}:\n    '{p}': {a}\n" for s, p, a in rules)
    return f"---\npermission:\n{lines}---\n# agent\n" if rules else "---\n---\n# agent\n"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), steps=STEPS, start=CONFIG)
def test_the_lane_judges_as_the_uncached_judgment_across_layers_and_held_changes(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, steps: list[tuple[str, Any]],
    start: dict[str, Any],
) -> None:
    layout = Layout(tmp_path_factory.mktemp("layers"))
    layout.write_global(start)
    clock = ManualClock(1_000.0)
    lane, whole = (RecordedAuthority(PolicyStore(layout.agent_dir, layout.project, None, home=HOME), clock)
                   for _ in range(2))
    arbiter = DenyingArbiter(clock)
    inbox = SessionInbox(Path("/nonexistent"), "s1")
    asked = 0
    for kind, value in steps:
        if kind in ("global", "project", "agent"):
            if kind == "global":
                _replace(layout.global_config, json.dumps(value))
            elif kind == "project":
                _replace(layout.project_config, value if isinstance(value, str) else json.dumps(value))
            else:
                name, rules = value
                path = layout.agent_file(name)
                if rules is None:
                    path.unlink(missing_ok=True)
                else:
                    _replace(path, _agent_text(rules))
            assert lane.store.reload_if_changed() == whole.store.reload_if_changed()
        elif kind in ("accept", "decline"):
            for authority in (lane, whole):
                for pending in authority.store.pending():
                    (authority.accept if kind == "accept" else authority.decline)(pending)
        elif kind == "grant":
            grant_in_both((lane, whole), SESSIONS, value)
        elif kind == "revoke":
            revoke_first_two((lane, whole))
        else:
            for session in SESSIONS:
                at_once = AtOnce(session, lane, clock, 60_000, arbiter.decide_at_once)
                for _ in range(3):  # new, seen once, kept: the asks of several agents in one intake
                    clock.advance(0.0007)
                    reads = []
                    for body in value:
                        asked += 1
                        raw = json.dumps({**body, "id": f"r{asked}", "targetSessionId": session}).encode()
                        reads.append((f"r{asked}.json", FileRead(raw=raw, parsed=parse_request(raw),
                                                                 identity=(1, 2, 3))))
                    served = at_once.serve(inbox, Intake(reads, frozenset(), {}))
                    assert_lane_judged_as_whole(served, reads, whole, session, clock, arbiter)
    assert [g.decided for g in lane.list_grants()] == [g.decided for g in whole.list_grants()]
