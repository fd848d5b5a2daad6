"""The wire's read and write rules, on real bytes.

`docs/design/contract.md` § Reading requests, § Writing responses.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.courier.broker import BrokerRefused, decode_parcel
from core.forwarding.liveness import parse_heartbeat
from core.wire.base import MAX_WIRE_NESTING, NestedTooDeeply, check_nesting, strict_json_loads
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
    decision_source_json,
    read_decision_source,
)
from core.wire.reader import RequestRejected, parse_request
from core.wire.response import (
    ForwardedResponse,
    approve,
    approve_for_session,
    deny,
    encode_response,
    parse_response,
)

BASE: dict[str, Any] = {
    "id": "1752600000123-k3j9x0qa-48211",
    "createdAt": 1752600000123,
    "requesterSessionId": "019ff96a-1111-7000-8000-aaaaaaaaaaaa",
    "targetSessionId": "019ff969-c34c-70be-9034-fae19c852932",
    "requesterAgentName": "Explore",
}
INTENT: dict[str, Any] = {
    "surface": "path_read",
    "matchValues": ["/worktree/issue-42/src/foo.ts", "src/foo.ts"],
    "boundaryValue": "/worktree/issue-42/src/foo.ts",
    "requesterCwd": "/worktree/issue-42",
    "principal": {"sessionId": BASE["requesterSessionId"], "agentName": "Explore"},
}


def read(**fields: Any) -> Any:
    return parse_request(json.dumps({**BASE, **fields}).encode())


def test_legacy_request_reads_every_field() -> None:
    parsed = read(
        message="Agent 'Explore' requested bash command 'git push origin main'. Allow?",
        source="tool_call",
        surface="bash",
        value="git push origin main",
        sessionApproval={"surface": "bash", "patterns": ["git push *"]},
    )
    req = parsed.request
    assert (req.id, req.created_at, req.requester_agent_name) == (BASE["id"], 1752600000123.0, "Explore")
    assert req.surface == "bash" and req.value == "git push origin main" and req.source == "tool_call"
    assert req.session_approval is not None and req.session_approval.shape == "legacy"
    assert [(g.surface, g.pattern) for g in req.session_approval.grants] == [("bash", "git push *")]
    assert parsed.access_intent is None and parsed.dropped == {}


def test_newest_request_reads_intent_payload_and_grants() -> None:
    parsed = read(
        payload={
            "kind": "bash",
            "request": {
                "requester": {"agentName": "Explore", "forwarded": False, "sessionId": None},
                "surface": "bash", "toolName": "bash", "invokedToolName": None,
                "value": "git push origin main", "matchedPattern": "git *",
                "commandContext": None, "executedUnit": None,
            },
            "evidence": [{"label": "command", "text": "git push origin main", "detail": None}],
            "annotations": [],
        },
        sessionApproval={"grants": [{"surface": "bash", "pattern": "git push *"}]},
        accessIntent={**INTENT, "surface": "bash", "matchValues": ["git push origin main"],
                      "boundaryValue": None, "askingUnits": [{"command": "git push origin main"}],
                      "floor": "<indirection-bash-wrapper>"},
    )
    intent = parsed.access_intent
    assert intent is not None and intent.match_values == ("git push origin main",)
    assert intent.floor == "<indirection-bash-wrapper>"
    assert intent.asking_units is not None and intent.asking_units[0].command == "git push origin main"
    assert parsed.request.payload is not None and parsed.request.payload.request.matched_pattern == "git *"
    assert parsed.request.session_approval is not None
    assert parsed.request.session_approval.shape == "grants"


def test_raw_bytes_are_kept_exactly() -> None:
    data = json.dumps({**BASE, "value": "x"}, indent=2).encode()
    assert parse_request(data).raw == data


@pytest.mark.parametrize(
    ("mutation", "reason"),
    [
        ({"id": None}, "'id' must be a string"),
        ({"createdAt": "1"}, "'createdAt' must be a finite number"),
        ({"createdAt": True}, "'createdAt' must be a finite number"),
        ({"targetSessionId": 7}, "'targetSessionId' must be a string"),
        ({"requesterAgentName": ["x"]}, "'requesterAgentName' must be a string"),
    ],
)
def test_required_field_of_wrong_type_rejects(mutation: dict[str, Any], reason: str) -> None:
    with pytest.raises(RequestRejected, match=reason):
        read(**mutation)


@pytest.mark.parametrize("missing", ["id", "createdAt", "requesterSessionId", "targetSessionId",
                                     "requesterAgentName"])
def test_missing_required_field_rejects(missing: str) -> None:
    body = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(RequestRejected, match=f"'{missing}' is missing"):
        parse_request(json.dumps(body).encode())


def test_message_is_optional_for_newest_children() -> None:
    assert read().request.message is None


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b"{\"id\": ", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b"\"text\"", "not an object"),
        (b"null", "not an object"),
        (b'{"createdAt": NaN}', "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    ],
)
def test_unusable_bytes_have_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(RequestRejected, match=reason):
        parse_request(data)


def test_over_one_mebibyte_is_rejected() -> None:
    data = json.dumps({**BASE, "message": "x" * (1024 * 1024)}).encode()
    with pytest.raises(RequestRejected, match="over the 1048576-byte limit"):
        parse_request(data)


@pytest.mark.parametrize(
    "bad",
    [
        {"matchValues": "src/foo.ts"},
        {"matchValues": ["ok", 3]},
        {"boundaryValue": 5},
        {"requesterCwd": None},
        {"principal": {"sessionId": "s"}},
        {"principal": {"sessionId": "s", "agentName": None}},
        {"floor": None},
        {"floor": 1},
        {"askingUnits": []},
        {"askingUnits": [{"floor": "x"}]},
        {"askingUnits": [{"command": "ls", "floor": None}]},
        {"surface": None},
    ],
)
def test_malformed_intent_is_dropped_whole_and_request_still_usable(bad: dict[str, Any]) -> None:
    parsed = read(accessIntent={**INTENT, **bad}, surface="read", value="src/foo.ts")
    assert parsed.access_intent is None
    assert "accessIntent" in parsed.dropped
    # The display fields survive; they are never turned into facts.
    assert parsed.request.value == "src/foo.ts"


def test_intent_without_boundary_key_is_dropped() -> None:
    intent = {k: v for k, v in INTENT.items() if k != "boundaryValue"}
    assert read(accessIntent=intent).access_intent is None


def test_unknown_fields_are_ignored_everywhere() -> None:
    parsed = read(accessIntent={**INTENT, "future": 1}, futureTopLevel={"x": 1})
    assert parsed.access_intent is not None and parsed.dropped == {}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("message", 5),
        ("surface", {"x": 1}),
        ("value", ["ls"]),
        ("source", "shell"),
        ("sessionApproval", {"surface": "", "patterns": ["x"]}),
        ("sessionApproval", {"surface": "bash", "patterns": "x"}),
        ("sessionApproval", {"grants": []}),
        ("sessionApproval", {"grants": [{"surface": "", "pattern": "x"}]}),
        ("payload", {"kind": "nope"}),
    ],
)
def test_malformed_optional_field_is_dropped_alone(field: str, value: Any) -> None:
    parsed = read(**{field: value}, accessIntent=INTENT)
    assert field in parsed.dropped
    assert parsed.access_intent is not None


def test_null_display_fields_read_as_absent() -> None:
    parsed = read(surface=None, value=None)
    assert parsed.request.surface is None and parsed.dropped == {}


def test_hostile_strings_are_kept_verbatim() -> None:
    hostile = "../../etc/passwd\u202e\x1b[31m[@click=app.quit]x[/]\x00"
    parsed = read(requesterAgentName=hostile, value=hostile)
    assert parsed.request.requester_agent_name == hostile and parsed.request.value == hostile


# -- responses -------------------------------------------------------------------------------


def test_response_bytes_are_compact_in_reference_key_order() -> None:
    response = deny(responder="S", at_ms=1790000004321, decided_by=UserDecision(via="dialog"),
                    reason="  use the staging remote ")
    assert encode_response(response) == (
        b'{"approved":false,"state":"denied_with_reason","denialReason":"use the staging remote",'
        b'"responderSessionId":"S","respondedAt":1790000004321,"decidedBy":{"kind":"user","via":"dialog"}}'
    )


def test_blank_reason_becomes_plain_denied() -> None:
    response = deny(responder="S", at_ms=1, decided_by=None, reason="   ")
    assert response.state == "denied" and response.denial_reason is None
    assert b"denialReason" not in encode_response(response)


def test_approved_for_session_carries_width() -> None:
    body = json.loads(encode_response(approve_for_session(responder="S", at_ms=1, decided_by=None)))
    assert body == {"approved": True, "state": "approved_for_session", "responderSessionId": "S",
                    "respondedAt": 1, "sessionGrantWidth": "proven"}


def test_nullable_decision_fields_are_written_as_null() -> None:
    body = json.loads(encode_response(approve(
        responder="S", at_ms=1, decided_by=AuthorizerDecision(name="judge", verdict="allow", reason=None))))
    assert body["decidedBy"] == {"kind": "authorizer", "name": "judge", "verdict": "allow", "reason": None}
    rule = json.loads(encode_response(approve(
        responder="S", at_ms=1, decided_by=RuleDecision(surface="bash", pattern="git *", origin="global"))))
    assert rule["decidedBy"] == {"kind": "rule", "surface": "bash", "pattern": "git *", "origin": "global"}


@pytest.mark.parametrize(
    "fields",
    [
        {"approved": True, "state": "denied"},
        {"approved": False, "state": "approved"},
        {"approved": False, "state": "denied_with_reason"},
        {"approved": False, "state": "denied_with_reason", "denial_reason": "  "},
        {"approved": False, "state": "denied", "denial_reason": "why"},
        {"approved": True, "state": "approved_for_serving_session"},
        {"approved": True, "state": "approved", "session_grant_width": "proven"},
    ],
)
def test_inconsistent_responses_cannot_be_built(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ForwardedResponse(responder_session_id="S", responded_at=1, **fields)


def test_lone_surrogates_still_give_valid_json() -> None:
    response = deny(responder="S", at_ms=1, decided_by=GateErrorDecision(reason="bad \ud800 id"))
    data = encode_response(response)
    data.decode("utf-8")
    assert json.loads(data)["decidedBy"]["reason"] == "bad \ud800 id"


def test_written_responses_read_back_like_a_child() -> None:
    for response in (
        approve(responder="S", at_ms=5, decided_by=UserDecision(via="dialog")),
        approve_for_session(responder="S", at_ms=5, decided_by=None, width="family"),
        deny(responder="S", at_ms=5, decided_by=GateErrorDecision(reason="x"), reason="r"),
    ):
        read_back = parse_response(encode_response(response))
        assert read_back is not None
        assert (read_back.approved, read_back.state) == (response.approved, response.state)
        assert read_back.decided_by == response.decided_by


def test_decision_source_reader_is_all_or_nothing_and_depth_capped() -> None:
    leaf: dict[str, Any] = {"kind": "user", "via": "dialog"}
    assert read_decision_source({"kind": "user", "via": "voice"}) is None
    assert read_decision_source({"kind": "martian"}) is None
    nested: dict[str, Any] = leaf
    for _ in range(3):
        nested = {"kind": "forwarded", "responderSessionId": "p", "decision": nested}
    assert isinstance(read_decision_source(nested), ForwardedDecision)
    too_deep = {"kind": "forwarded", "responderSessionId": None, "decision": nested}
    assert read_decision_source(too_deep) is None


@pytest.mark.parametrize(
    "body",
    [b"[]", b'{"approved":"yes","state":"approved","responderSessionId":"S"}',
     b'{"approved":true,"state":"maybe","responderSessionId":"S"}',
     b'{"approved":true,"state":"approved"}'],
)
def test_child_reader_rejects_malformed_responses(body: bytes) -> None:
    assert parse_response(body) is None


# --------------------------------------------------------------------------------------------------
# Nesting: a file another process can write is refused before it is decoded when it nests deeper than
# `MAX_WIRE_NESTING` (the decoder recurses per level: near the interpreter's limit any Python the
# garbage collector runs aborts the process; seen in CI with a hostile request nested 10,000 deep).

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("depth", [1, MAX_WIRE_NESTING - 1, MAX_WIRE_NESTING])
def test_nesting_up_to_the_limit_is_read(depth: int) -> None:
    text = '{"a": ' + "[" * (depth - 1) + '"x"' + "]" * (depth - 1) + "}"
    check_nesting(text, MAX_WIRE_NESTING)
    assert strict_json_loads(text) is not None


def test_nesting_past_the_limit_is_refused_and_brackets_in_strings_do_not_count() -> None:
    over = "[" * (MAX_WIRE_NESTING + 1) + "]" * (MAX_WIRE_NESTING + 1)
    with pytest.raises(NestedTooDeeply, match=f"nested deeper than {MAX_WIRE_NESTING} levels"):
        strict_json_loads(over)
    quoted = json.dumps({"value": "[{" * 5_000, "escaped": '\\"[[[[' * 500})
    assert strict_json_loads(quoted) == json.loads(quoted)


def test_every_reader_of_other_processes_files_refuses_a_deep_one_with_a_reason() -> None:
    request = ('{"id":"a","createdAt":1,"requesterSessionId":"c","targetSessionId":"s","message":"m",'
               '"payload":' + DEEP + "}").encode()
    with pytest.raises(RequestRejected, match=f"nested deeper than {MAX_WIRE_NESTING} levels"):
        parse_request(request)
    assert parse_response(('{"approved":true,"x":' + DEEP + "}").encode()) is None
    assert parse_heartbeat(('{"sessionId":"s","pid":1,"updatedAt":1,"x":' + DEEP + "}").encode()) is None
    with pytest.raises(BrokerRefused, match="nested deeper"):
        decode_parcel(('{"v":1,"x":' + DEEP + "}").encode())


_TEXT = st.none() | st.text(max_size=8)
_DECISIONS: st.SearchStrategy[DecisionSource] = st.recursive(
    st.one_of(
        st.builds(UserDecision, via=st.sampled_from(["dialog", "select"])),
        st.builds(AuthorizerDecision, name=st.text(max_size=8), verdict=st.sampled_from(["allow", "deny"]),
                  reason=_TEXT),
        st.builds(RuleDecision, surface=st.text(max_size=8), pattern=_TEXT, origin=_TEXT),
        st.builds(SessionApprovalDecision, surface=st.text(max_size=8), pattern=_TEXT),
        st.builds(YoloDecision, pattern=_TEXT),
        st.builds(InfrastructureReadDecision),
        st.builds(UnavailableDecision, reason=st.text(max_size=8)),
        st.builds(GateErrorDecision, reason=st.text(max_size=8)),
    ),
    lambda inner: st.builds(ForwardedDecision, responder_session_id=_TEXT, decision=st.none() | inner),
    max_leaves=4,
)


@settings(max_examples=300, deadline=None)
@given(_DECISIONS)
def test_decided_by_is_written_as_pydantic_would_write_it(source: DecisionSource) -> None:
    """Issue 37: `decidedBy` is built without pydantic's serializer: the same object, key order too."""
    ours = decision_source_json(source)
    assert ours == source.model_dump(by_alias=True, mode="json")
    assert json.dumps(ours) == json.dumps(source.model_dump(by_alias=True, mode="json"))
