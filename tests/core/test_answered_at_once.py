"""An intake's answers all plainly written, reported at once (`Pipeline._all_plain`: a burst's, their
`answered` events told as one run) are reported as an answer at a time reports them
(`Pipeline._answered_each`): the same events in the same order, the same log parts, the same names
noted answered and no record made; an intake with any other answer is left to the answer-at-a-time
path, untouched. Each subscriber is told the run as it would be told each event (`ServingCore.subscribe`
with and without its `run`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core.serving.loop import ServingCore
from core.serving.verdicts import Published, VerdictRecord
from core.vocabulary.asks import AskKey, DenyingArbiter
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from core.wire.response import approve, deny
from tests.helpers import request_body, unrun

SESSION = "at-once-told"
Drawn = tuple[str, bool, str | None, str, float | None]  # name, allowed, history refused, outcome, arrived
NAMES = [f"r{i}.json" for i in range(8)] + ["semi;colon.json", "caf\u00e9.json"]
ANSWERS = st.tuples(st.sampled_from(NAMES), st.booleans(), st.sampled_from([None, None, None, "refused"]),
                    st.sampled_from(["rule", "fail_safe"]), st.sampled_from([None, 0.5, 1.0]))


def _core(root: Path, stack: contextlib.ExitStack) -> tuple[ServingCore, list[ServeEvent], list[ServeEvent]]:
    core = stack.enter_context(unrun(ServingCore(root / "root", root / "state", DenyingArbiter())))
    each: list[ServeEvent] = []
    runs: list[ServeEvent] = []
    core.subscribe(each.append)  # told each event of a run
    core.subscribe(runs.append, runs.extend)  # told a run at once
    core.add_session(SESSION)
    return core, each, runs


def _answers(drawn: Sequence[Drawn]) -> list[Published]:
    answers = []
    for name, allowed, history_failed, outcome, arrived in drawn:
        body = request_body(name.removesuffix(".json"), SESSION)
        if name.startswith("semi"):
            body["value"] = "a;b"
        parsed = parse_request(json.dumps(body).encode())
        response = (approve(responder="s", at_ms=1, decided_by=None) if allowed
                    else deny(responder="s", at_ms=1, decided_by=None, reason="no; never"))
        verdict = VerdictRecord(AskKey(SESSION, name), parsed, response, b"", outcome, arrived=arrived)
        answers.append(Published(verdict, True, history_failed))
    return answers


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=st.lists(ANSWERS, min_size=1, max_size=12), kept=st.sets(st.sampled_from(NAMES), max_size=2),
       contested=st.sets(st.sampled_from(NAMES), max_size=2), answered_before=st.sets(st.sampled_from(NAMES)))
def test_an_intake_told_at_once_is_told_as_an_answer_at_a_time(
    tmp_path_factory: pytest.TempPathFactory, drawn: list[Drawn], kept: set[str], contested: set[str],
    answered_before: set[str],
) -> None:
    root = tmp_path_factory.mktemp("told")
    with contextlib.ExitStack() as stack:
        fast, fast_each, fast_runs = _core(root / "fast", stack)
        slow, slow_each, slow_runs = _core(root / "slow", stack)
        answers = _answers(drawn)
        gone = frozenset(NAMES) - kept  # a request kept: its removal failed
        now = 100.0
        told: list[list[str]] = []
        for core in (fast, slow):
            served = core.served.by_id[SESSION]
            for name in answered_before:
                served.note_answered(name)
            for name in contested:
                served.contested[name] = 4242  # the other writer's pid
        fast_served, slow_served = fast.served.by_id[SESSION], slow.served.by_id[SESSION]
        parts: list[str] = []
        if not fast.pipeline._all_plain(fast_served, answers, gone, now, parts):
            # Left to the answer-at-a-time path, nothing told or changed.
            assert (parts, fast_each, fast_runs, len(fast_served.records)) == ([], [], [], 0)
            assert any(name in kept or name in contested or refused is not None
                       for name, _allowed, refused, _outcome, _arrived in drawn)
            return
        told.append(parts)
        event("told at once")
        lines: dict[str, list[str]] = {SESSION: []}
        slow.pipeline._answered_each(slow_served, answers, gone, now, lines)
        told.append(lines[SESSION])
        assert told[0] == told[1]
        assert fast_each == slow_each == fast_runs == slow_runs
        assert [event.key.name for event in fast_each] == [name for name, *_ in drawn]
        assert list(fast_served.answered) == list(slow_served.answered)
        assert len(fast_served.records) == len(slow_served.records) == 0
