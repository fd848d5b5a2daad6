"""A batch's log parts (`core.serving.answer_log.told_parts`) read exactly as each answer's part made
alone (`told_part`), whatever the names, agents, surfaces, values, verdicts and waits: the batch only
skips work when nothing in any of them needs escaping, cutting or a `;` replaced."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from core.serving.answer_log import SEMICOLON, told_part, told_parts
from core.serving.verdicts import VerdictRecord
from core.vocabulary.asks import AskKey
from core.wire.decisions import GateErrorDecision, RuleDecision
from core.wire.reader import parse_request
from core.wire.response import ForwardedResponse, approve, deny
from tests.helpers import request_body

S = "log-session"
NOW = 1_800_000_000.0
#: Characters a child may send (no lone surrogate: JSON text cannot carry one to the reader).
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=130)
PLAIN = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=90)
NAMES = st.one_of(st.sampled_from(["Explore", "main", "a\u202eb", "x;y", "back\\slash"]), TEXT)
RESPONSES: list[ForwardedResponse] = [
    approve(responder=S, at_ms=1, decided_by=RuleDecision(surface="bash", pattern="*", origin="t")),
    deny(responder=S, at_ms=1, decided_by=GateErrorDecision(reason="x"), reason="no one; attends\nhere"),
    deny(responder=S, at_ms=1, decided_by=None),
]


Shared = tuple[str, str, str, bool, ForwardedResponse, float | None, str]
"""What a burst's answers share: requester, principal, surface, whether it has an access intent, the
response, when they arrived, the outcome."""


@st.composite
def shared(draw: st.DrawFn) -> Shared:
    surface = draw(st.sampled_from(["bash", "ba\nsh", "r;d", ""]))
    response, outcome = draw(st.sampled_from(RESPONSES)), draw(st.sampled_from(["rule", "fail_safe"]))
    arrived = draw(st.one_of(st.none(), st.floats(NOW - 100, NOW)))
    return draw(NAMES), draw(NAMES), surface, draw(st.booleans()), response, arrived, outcome


@st.composite
def verdicts(draw: st.DrawFn, alike: Shared | None = None) -> VerdictRecord:
    request_id = draw(st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True))
    name = draw(st.one_of(st.just(f"{request_id}.json"), TEXT, PLAIN))
    requester, principal, surface, intent, response, arrived, outcome = alike or draw(shared())
    value = draw(st.one_of(PLAIN, TEXT, st.just("x" * 81), st.just("y" * 80)))
    fields: dict[str, object] = {"requesterAgentName": requester, "surface": surface, "value": value}
    if intent:
        matched = draw(st.lists(st.one_of(PLAIN, TEXT), min_size=1 if alike else 0, max_size=2))
        fields["accessIntent"] = {"surface": surface, "matchValues": matched, "boundaryValue": None,
                                  "requesterCwd": "/w",
                                  "principal": {"sessionId": "c", "agentName": principal}}
    parsed = parse_request(json.dumps(request_body(request_id, S, **fields)).encode())
    return VerdictRecord(AskKey(S, name), parsed, response, b"{}", outcome, None, arrived)


@st.composite
def bursts(draw: st.DrawFn) -> list[VerdictRecord]:
    """A burst's answers: alike but for their names and values; now and then one that is not."""
    alike = draw(shared())
    batch = draw(st.lists(verdicts(alike), min_size=1, max_size=8))
    if draw(st.integers(0, 4)) == 0:
        batch.insert(draw(st.integers(0, len(batch))), draw(verdicts()))
    return batch


@settings(max_examples=300, deadline=None)
@given(batch=st.lists(verdicts(), min_size=1, max_size=8))
def test_a_batchs_parts_read_as_each_answers_made_alone(batch: list[VerdictRecord]) -> None:
    assert told_parts(batch, NOW) == [told_part(verdict, NOW) for verdict in batch]


@settings(max_examples=300, deadline=None)
@given(batch=bursts())
def test_a_bursts_parts_read_as_each_answers_made_alone(batch: list[VerdictRecord]) -> None:
    """A burst's answers share their agents, surface, verdict and moment (what the answer before said is
    reused: an ask whose requester, principal and surface are all empty included)."""
    assert told_parts(batch, NOW) == [told_part(verdict, NOW) for verdict in batch]


@settings(max_examples=100, deadline=None)
@given(batch=st.one_of(st.lists(verdicts(), min_size=1, max_size=8), bursts()))
def test_no_part_holds_a_semicolon_of_its_own(batch: list[VerdictRecord]) -> None:
    """A `;` separates the answers of a joined line: a part never holds one (it is `SEMICOLON`)."""
    for part, verdict in zip(told_parts(batch, NOW), batch, strict=True):
        assert ";" not in part and "\n" not in part
        if ";" in verdict.key.name:
            assert SEMICOLON in part
