"""The judgment of a new ask made by the policy's compiled reading (`RecordedAuthority.judge`) is the
judgment made in full (`judge_afresh`): verdict, `decidedBy`, denial reason, config errors, and the
explanation and trail, which are built only when read.

Configs, grants and asks are drawn at random (`tests.rules.support`); each ask is judged as a burst
judges it (new, then again: kept), and afresh, with a reload between some of them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.testing import ManualClock
from core.vocabulary.asks import Judgment, LazySequence
from core.wire.reader import parse_request
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
    """A request body with facts: hostile or plain."""
    agent = draw(ASK_AGENTS)
    surface = draw(ASK_SURFACES | PLAIN_SURFACES)
    intent: dict[str, Any] = {"surface": surface, "matchValues": draw(ASK_VALUE_LISTS | PLAIN_VALUES),
                              "boundaryValue": draw(st.none() | st.text(max_size=5)), "requesterCwd": "/w",
                              "principal": {"sessionId": "child", "agentName": agent}}
    floor = draw(ASK_FLOORS)
    if floor is not None:
        intent["floor"] = floor
    return {"id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
            "requesterAgentName": agent, "message": "m", "accessIntent": intent}


def _same(made: Judgment, full: Judgment) -> None:
    assert (made.verdict, made.decided_by, made.reason, made.config_errors) == (
        full.verdict, full.decided_by, full.reason, full.config_errors)
    assert list(made.explanation) == list(full.explanation)
    assert list(made.trail) == list(full.trail)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), grants=GRANTS, asks=st.lists(bodies(), min_size=1, max_size=8),
       reload_at=st.integers(0, 8))
def test_a_compiled_judgment_is_the_full_one(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, grants: list[tuple[str, str]],
    asks: list[dict[str, Any]], reload_at: int,
) -> None:
    judge_alike(tmp_path_factory.mktemp("judged"), data, grants, asks, reload_at, ManualClock(1_000.0),
                lambda made, full, parsed, session: _same(made.judge(parsed, session),
                                                          full.judge_afresh(parsed, session)))


def test_a_judgment_made_without_its_init_is_the_constructed_one(tmp_path: Path) -> None:
    """Every field of `Judgment` is written (a field added to it would be missed otherwise)."""
    layout_root = tmp_path / "agent" / "extensions" / "pi-permission-system"
    layout_root.mkdir(parents=True)
    (layout_root / "config.json").write_text(json.dumps({"permission": {"bash": {"git *": "allow"}}}))
    authority = RecordedAuthority(PolicyStore(tmp_path / "agent", tmp_path / "project", None, home=HOME))
    body = {"id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
            "requesterAgentName": "Explore", "accessIntent": {
                "surface": "bash", "matchValues": ["git status"], "boundaryValue": None, "requesterCwd": "/w",
                "principal": {"sessionId": "child", "agentName": "Explore"}}}
    judgment = authority.judge(parse_request(json.dumps(body).encode()), "s")
    for lazy in (judgment.explanation, judgment.trail):  # built when read, not before
        assert isinstance(lazy, LazySequence) and not lazy.built
    assert set(vars(judgment)) == {field.name for field in dataclasses.fields(Judgment)}
    assert judgment == Judgment(**{field.name: getattr(judgment, field.name)
                                   for field in dataclasses.fields(Judgment)})
    assert judgment.verdict == "allow"
    with pytest.raises(dataclasses.FrozenInstanceError):
        judgment.verdict = "deny"  # type: ignore[misc]
