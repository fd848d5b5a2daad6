"""The response written from pre-made pieces (`core.wire.response.encode_response`) is byte for byte
what the general writer (`compact_json(response_json(...))`) writes, for every state, reason,
responder, time and `decidedBy` (nested, hostile text, lone surrogates), and a child reads it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.wire.base import compact_json
from core.wire.decisions import (
    AuthorizerDecision,
    DecisionSource,
    ForwardedDecision,
    GateErrorDecision,
    InfrastructureReadDecision,
    RuleDecision,
    SessionApprovalDecision,
    UnavailableDecision,
    UserDecision,
    YoloDecision,
)
from core.wire.response import (
    ForwardedResponse,
    approve,
    approve_for_session,
    deny,
    encode_response,
    parse_response,
    response_json,
)

TEXT = st.text(max_size=8) | st.sampled_from(
    ['"', "\\", "\x00\x1f\x7f", "\u2028\u2029", "é\U0001f600", "\ud800", "a\udfffb", "</script>", " ", ""])
MAYBE = st.none() | TEXT


class TaggedRule(RuleDecision):
    """A decision of a kind the pieces were not made for: written the general way."""


DECISIONS: st.SearchStrategy[DecisionSource] = st.recursive(
    st.one_of(
        st.builds(UserDecision, via=st.sampled_from(["dialog", "select"])),
        st.builds(AuthorizerDecision, name=TEXT, verdict=st.sampled_from(["allow", "deny"]), reason=MAYBE),
        st.builds(RuleDecision, surface=TEXT, pattern=MAYBE, origin=MAYBE),
        st.builds(TaggedRule, surface=TEXT, pattern=MAYBE, origin=MAYBE),
        st.builds(SessionApprovalDecision, surface=TEXT, pattern=MAYBE),
        st.builds(YoloDecision, pattern=MAYBE),
        st.builds(InfrastructureReadDecision),
        st.builds(UnavailableDecision, reason=TEXT),
        st.builds(GateErrorDecision, reason=TEXT),
    ),
    lambda inner: st.builds(ForwardedDecision, responder_session_id=MAYBE, decision=st.none() | inner),
    max_leaves=6,
)
DECIDED = st.none() | DECISIONS
TIMES = st.integers(min_value=0, max_value=2**45) | st.integers()
RESPONSES = st.one_of(
    st.builds(approve, responder=TEXT, at_ms=TIMES, decided_by=DECIDED),
    st.builds(approve_for_session, responder=TEXT, at_ms=TIMES, decided_by=DECIDED,
              width=st.sampled_from(["proven", "family"])),
    st.builds(deny, responder=TEXT, at_ms=TIMES, decided_by=DECIDED, reason=MAYBE),
)


@settings(max_examples=1500, deadline=None)
@given(RESPONSES)
def test_the_pieces_write_the_general_writers_bytes(response: ForwardedResponse) -> None:
    written = encode_response(response)
    assert written == compact_json(response_json(response))
    read = parse_response(written)
    assert read is not None
    assert (read.approved, read.state, read.responder_session_id) == (
        response.approved, response.state, response.responder_session_id)
    assert read.denial_reason == response.denial_reason


def test_a_response_without_a_decision_or_reason_is_written_alike() -> None:
    for response in (approve(responder="s", at_ms=1, decided_by=None),
                     approve_for_session(responder="s", at_ms=1, decided_by=None),
                     deny(responder="s", at_ms=1, decided_by=None)):
        assert encode_response(response) == compact_json(response_json(response))
