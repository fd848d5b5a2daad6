"""A judgment kept for identical asks (`core.judging.kept`) is exactly the judgment made afresh.

Two authorities over the same config files and the same grants: one judges as serving does (kept
judgments, shared responses), the other judges every ask afresh (`judge_afresh`, the rules'
`explain`). Whatever the asks (repeated, padded or odd surfaces, values beyond the BMP, floors,
asking units, odd agent names, no facts or dropped facts, large facts) and whatever happens between
them (a reload, a grant made or revoked), both give the same verdict, `decidedBy`, denial reason,
explanation, trail and config errors, the same response bytes, the same grant use counts and the
same log lines, on both readings (ours and pi 20.7.3's: the config below is read otherwise by pi).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.clock import wall_ms
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.judgment import judge_ask, unreasoned_denial
from core.testing import ManualClock
from core.vocabulary.asks import Judgment
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest, SessionGrant
from core.wire.response import ForwardedResponse, approve, deny, encode_response
from tests.rules.support import HOME, Layout

#: Config versions a reload moves between: rules pi 20.7.3 reads otherwise (array-index keys, `?` on
#: UTF-16 units, families), a deny with a reason, a config error, yolo, a floor that turns allows to ask.
CONFIGS: tuple[dict[str, Any], ...] = (
    {"permission": {
        "bash": {"*": "ask", "git *": "allow", "42": "deny", "rm *": {"action": "deny", "reason": "no rm"}},
        "skill": {"*": "deny", "7": "allow"},
        "path": {"*": "ask", "/tmp/*": "allow"},
        "path_write": {"/etc/*": "deny"},
        "external_directory": {"*": "ask", "/cache/?": "allow"},
        "mcp": {"srv:*": "allow"},
        "read": {"~/*": "allow"},
    }},
    {"permission": {"bash": {"*": "ask", "git *": "deny", "ls *": "allow", "x": "maybe"},
                    "path": {"*": "allow"}, "*": "ask"}},
    {"yoloMode": True, "permission": {"bash": {"rm *": "deny", "git *": "allow"}, "skill": {"*": "ask"}}},
)
PROJECTS: tuple[dict[str, Any] | str, ...] = (
    {"permission": {"bash": {"git push *": "deny"}}},
    "{not json",  # an invalid project scope: its allows floor to ask (fail-closed)
)
#: pi-authorizer's own `--rules` file: its allow never overrides another layer's deny.
RULES_FILE = {"permission": {"bash": {"rm -f *": "allow", "git *": "allow"}}}

SURFACES = ("bash", "bash ", " bash", "skill", "path", "path_read", "path_write", "external_directory",
            "external_directory_read", "mcp", "read", " read", "write", "tool", "\U0001f600")
#: Asks the rules and grants below meet (padded, commented, beyond the BMP); any text besides.
MEANT = (("bash", "git status"), ("bash", "git push -f"), ("bash", "ls -la"), ("bash", "make all"),
         ("bash", "rm -f x"), ("bash", "rm -rf /"), ("bash", "42"), ("skill", "7"), ("path", "/tmp/a"),
         ("path_write", "/etc/passwd"), ("external_directory", "/cache/a"),
         ("external_directory_read", "/cache/\U0001f600"), ("read", "~/x"), ("read", "/home/me/x"),
         ("mcp", "srv:q"), ("mcp", "other:q"), ("bash ", "git status"), (" bash", "# c\ngit push"),
         ("bash", "  git x  "), ("bash", "\ufeffls -la"), ("tool", ""))
VALUES = st.text(alphabet="git rm42/7tmpec~?\U0001f600*.-fl#\n", max_size=12)
FLOORS = st.none() | st.sampled_from(["ask", "deny", ""])
UNIT = st.fixed_dictionaries({"command": st.sampled_from([v for _, v in MEANT]) | VALUES},
                             optional={"floor": st.sampled_from(["ask", "deny", ""])})
AGENTS = st.sampled_from(["Explore", "other", "", "unknown", "sub/x", "a\u200db"])
LARGE = "git " + "x" * 3000  # over what is kept: judged each time


@st.composite
def asks(draw: st.DrawFn) -> dict[str, Any]:
    """A request body: facts (maybe large, maybe with units), no facts, or facts dropped as malformed."""
    body: dict[str, Any] = {"id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                            "requesterAgentName": draw(AGENTS), "message": "m"}
    kind = draw(st.sampled_from(["facts"] * 8 + ["none", "malformed", "large"]))
    if kind == "none":
        return body
    if kind == "malformed":
        body["accessIntent"] = {"surface": 7}
        return body
    surface, values = draw(st.sampled_from(MEANT).map(lambda m: (m[0], [m[1]])) | st.tuples(
        st.sampled_from(SURFACES), st.lists(VALUES, max_size=3)))
    intent: dict[str, Any] = {
        "surface": surface,
        "matchValues": [LARGE] if kind == "large" else values + draw(st.lists(VALUES, max_size=1)),
        "boundaryValue": draw(st.none() | VALUES), "requesterCwd": "/w",
        "principal": {"sessionId": "child", "agentName": draw(AGENTS)},
    }
    floor = draw(FLOORS)
    if floor is not None:
        intent["floor"] = floor
    if draw(st.integers(0, 3)) == 0:
        intent["askingUnits"] = draw(st.lists(UNIT, min_size=1, max_size=3))
    body["accessIntent"] = intent
    return body


STEP = {
    "ask": st.tuples(st.just("ask"), st.integers(0, 5), st.sampled_from(["s1", "s2"])),
    "reload": st.tuples(st.just("reload"), st.integers(0, len(CONFIGS) - 1),
                        st.integers(0, len(PROJECTS) - 1)),
    "grant": st.tuples(st.just("grant"), st.integers(0, 5) | st.sampled_from([
        ("bash", "rm *"), ("bash", "make *"), ("path", "/etc/*"), ("path", "/tmp/*"), ("mcp", "other:*"),
    ]), st.sampled_from(["s1", "s2"])),
    "revoke": st.tuples(st.just("revoke"), st.sampled_from(["s1", "s2"])),
    "tick": st.tuples(st.just("tick"), st.sampled_from([0.0004, 0.001, 2.0])),
}
#: Mostly asks (each repeated, so kept), between them reloads, grants made and revoked, time passing.
STEPS = st.lists(
    st.sampled_from(["ask"] * 6 + ["reload", "grant", "revoke", "tick"]).flatmap(STEP.__getitem__),
    min_size=4, max_size=40)


class Twins:
    """The serving authority and the afresh one, over the same files, with the same grants."""

    def __init__(self, tmp: Path) -> None:
        self.layout = Layout(tmp)
        self.layout.write_global(CONFIGS[0])
        self.layout.write_project(PROJECTS[0])
        self.layout.write_agent("Explore", "permission:\n  bash:\n    'ls *': allow\n    'rm -rf *': deny\n")
        self.rules = self.layout.write(tmp / "rules.json", RULES_FILE)
        self.clock = ManualClock(1_000.0)
        self.kept = self._authority()
        self.fresh = self._authority()

    def _authority(self) -> RecordedAuthority:
        store = PolicyStore(self.layout.agent_dir, self.layout.project, self.rules, home=HOME,
                            accept_widening=True)
        return RecordedAuthority(store, self.clock)

    def reload(self, config: int, project: int) -> None:
        for path, content in ((self.layout.global_config, CONFIGS[config]),
                              (self.layout.project_config, PROJECTS[project])):
            fresh = path.with_suffix(".new")  # a new inode: the signature changes whatever the size
            fresh.write_text(content if isinstance(content, str) else json.dumps(content))
            os.replace(fresh, path)
        assert self.kept.store.reload_if_changed() == self.fresh.store.reload_if_changed()

    def grant(self, surface: str, pattern: str, session: str) -> None:
        refused = [a.refusal("Explore", [SessionGrant(surface=surface, pattern=pattern)])
                   for a in (self.kept, self.fresh)]
        assert refused[0] == refused[1]
        if refused[0] is None:
            for authority in (self.kept, self.fresh):
                authority.record(session, [SessionGrant(surface=surface, pattern=pattern)], "Explore")

    def revoke(self, session: str) -> None:
        for authority in (self.kept, self.fresh):
            grants = [g for g in authority.list_grants() if g.session_id == session]
            if grants:
                assert authority.revoke_grant(session, grants[0].grant_id)


def _same_judgment(kept: Judgment, fresh: Judgment) -> None:
    assert (kept.verdict, kept.decided_by, kept.reason) == (fresh.verdict, fresh.decided_by, fresh.reason)
    assert list(kept.explanation) == list(fresh.explanation)
    assert list(kept.trail) == list(fresh.trail)
    assert kept.config_errors == fresh.config_errors


def _response(judgment: Judgment, responder: str, clock: ManualClock) -> ForwardedResponse:
    """The response built afresh, as serving built it before responses were shared."""
    if judgment.verdict == "allow":
        return approve(responder=responder, at_ms=wall_ms(clock), decided_by=judgment.decided_by)
    reason = judgment.reason if judgment.reason and judgment.reason.strip() else unreasoned_denial(judgment)
    return deny(responder=responder, at_ms=wall_ms(clock), decided_by=judgment.decided_by, reason=reason)


def _logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [r.getMessage() for r in caplog.records]
    caplog.clear()
    return lines


def _ask(twins: Twins, parsed: ParsedRequest, session: str, caplog: pytest.LogCaptureFixture) -> None:
    kept, decision = judge_ask(twins.kept, parsed, session, twins.clock)
    kept_logs = _logged(caplog)
    fresh = twins.fresh.judge_afresh(parsed, session)
    assert _logged(caplog) == kept_logs
    if decision is not None and decision.outcome == "over-limit":
        return
    _same_judgment(kept, fresh)
    assert (decision is None) == (fresh.verdict == "ask")
    if decision is not None:
        assert decision.outcome == "rule"
        assert encode_response(decision.response) == encode_response(_response(fresh, session, twins.clock))
    counts = [[(g.session_id, g.grant_id, g.decided) for g in authority.list_grants()]
              for authority in (twins.kept, twins.fresh)]
    assert counts[0] == counts[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pool=st.lists(asks(), min_size=6, max_size=6), steps=STEPS)
def test_a_kept_judgment_is_the_fresh_one(
    tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture,
    pool: list[dict[str, Any]], steps: list[tuple[Any, ...]],
) -> None:
    caplog.set_level(logging.INFO, logger="pi_authorizer.rules")
    twins = Twins(tmp_path_factory.mktemp("kept"))
    caplog.clear()
    requests = [parse_request(json.dumps(body).encode()) for body in pool]
    for step in steps:
        if step[0] == "ask":
            # Each ask its own parse, as each request file is: kept judgments are found by value.
            _ask(twins, parse_request(requests[step[1]].raw), step[2], caplog)
            _ask(twins, requests[step[1]], step[2], caplog)
        elif step[0] == "reload":
            twins.reload(step[1], step[2])
        elif step[0] == "grant":  # what one ask of the pool asks, or a wider pattern
            surface, pattern = _grant_for(pool[step[1]]) if isinstance(step[1], int) else step[1]
            twins.grant(surface, pattern, step[2])
        elif step[0] == "tick":
            twins.clock.advance(step[1])
        else:
            twins.revoke(step[1])
        _logged(caplog)  # a reload's or a grant's own lines are the same code for both


def _grant_for(body: dict[str, Any]) -> tuple[str, str]:
    intent = body.get("accessIntent") or {}
    values = intent.get("matchValues") or ["*"]
    return str(intent.get("surface") or "bash") or "bash", str(values[0])


def test_a_burst_of_one_command_is_judged_once_and_a_reload_judges_it_again(tmp_path: Path) -> None:
    twins = Twins(tmp_path)
    body = {"id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
            "requesterAgentName": "other", "accessIntent": {
                "surface": "bash", "matchValues": ["ls -la"], "boundaryValue": None, "requesterCwd": "/w",
                "principal": {"sessionId": "child", "agentName": "other"}}}
    asks = [parse_request(json.dumps(body).encode()) for _ in range(3)]
    first, second, third = (twins.kept.judge(a, "s1") for a in asks)
    assert first.verdict == "ask"
    assert third is second  # kept from its second judgment on
    twins.reload(2, 0)  # yolo: every ask is an allow now
    again = twins.kept.judge(asks[0], "s1")
    assert again.verdict == "allow"
    assert again.decided_by == twins.fresh.judge_afresh(asks[0], "s1").decided_by


def test_a_session_grant_counts_every_ask_it_decides(tmp_path: Path) -> None:
    twins = Twins(tmp_path)
    twins.grant("bash", "make *", "s1")
    body = {"id": "r", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
            "requesterAgentName": "other", "accessIntent": {
                "surface": "bash", "matchValues": ["make all"], "boundaryValue": None, "requesterCwd": "/w",
                "principal": {"sessionId": "child", "agentName": "other"}}}
    ask = parse_request(json.dumps(body).encode())
    for _ in range(4):
        assert twins.kept.judge(ask, "s1").verdict == "allow"
    twins.kept.judge(ask, "s1", preview=True)  # a what-if is not a use
    assert [g.decided for g in twins.kept.list_grants()] == [4]
    assert twins.kept.judge(ask, "s2").verdict == "ask"  # another session's grants are its own
