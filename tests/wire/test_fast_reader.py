"""The reader's fast paths (`core.wire.fast_reader`: `read_plain`, then `decode_usual` and
`read_usual`) give exactly what the tolerant reader gives: the same models (values, types, which
fields were set), the same bytes kept, the same dropped fields and reasons, the same rejection, on
valid, near-valid and hostile request files."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.alias_generators import to_snake

from core.wire.base import MAX_WIRE_NESTING
from core.wire.fast_reader import decode_usual, read_usual
from core.wire.limits import MAX_REQUEST_BYTES
from core.wire.reader import PRE_READ, RequestRejected, parse_request, read_plain, read_tolerantly


class Raw(str):
    """JSON text written as it is (a number literal JSON allows but Python would write otherwise)."""


class Pairs(list[tuple[str, Any]]):
    """A JSON object as its written members, in order: a key may appear twice (the last one counts)."""


def dumps(value: Any, space: str = "") -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Pairs | dict):
        items = value if isinstance(value, Pairs) else value.items()
        return "{" + f",{space}".join(f"{json.dumps(k)}:{space}{dumps(v, space)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + f",{space}".join(dumps(v, space) for v in value) + "]"
    lone_surrogate = isinstance(value, str) and any("\ud800" <= c <= "\udfff" for c in value)
    return json.dumps(value, ensure_ascii=lone_surrogate)  # written as `\ud800`, as a child writes it


NUMBERS = st.sampled_from(["1e400", "-1e400", "1E2", "-0", "-0.0", "1.0", "10" * 30, "9007199254740993",
                           "1.7976931348623157e308", "2e-400", "NaN", "Infinity", "0.1e1", "-Infinity",
                           "1" * 4300, "1" * 4301, "-" + "9" * 5000, "0." + "3" * 800, "1e99999", "1e-99999",
                           "1.5E+3", "01", "1.", ".5", "+1", "0x10", "1_000"]).map(Raw)
#: String literals as written (a raw control character or NUL, surrogate escapes paired, lone, reversed
#: or cut, escapes JSON has and has not, a DEL, a non-ASCII letter unescaped).
STRING_LITERALS = st.sampled_from([
    '"a\x00b"', '"\t"', '"\x1f"', '"\x7f"', '"\\u0000"', '"\\/"', '"\\ud83d\\ude00"', '"\\uD83D\\uDE00"',
    '"\\ud800\\u0041"', '"\\udc00\\ud800"', '"\\ud800"', '"\\u00"', '"\\x41"', '"\\a"', '"é\\u00e9"',
    '"\u2028"', '"\\"', '"abc', "'single'",
]).map(Raw)
TEXT = st.text(max_size=6) | st.sampled_from(["\ud800", "\udfff", "\x00", "\u202e", "é", "\U0001f600", " "])
#: Nesting at, just past and far past the limit (`core.wire.base.MAX_WIRE_NESTING`), in brackets and braces.
DEEP = st.sampled_from([Raw("[" * n + "]" * n) for n in (127, 128, 129, 5000)]
                       + [Raw('{"a":' * n + "1" + "}" * n) for n in (127, 129)])
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
           | NUMBERS | STRING_LITERALS | DEEP)
HOSTILE = st.recursive(
    SCALARS, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(TEXT, kids, max_size=3), max_leaves=6)
NAMES = st.sampled_from(["Explore", "general", "Explore ", ""]) | TEXT

PRINCIPAL = st.fixed_dictionaries({"sessionId": NAMES, "agentName": NAMES})
UNIT = st.fixed_dictionaries({"command": TEXT}, optional={"floor": TEXT})
INTENT = st.fixed_dictionaries(
    {"surface": st.sampled_from(["bash", "path_read", "mcp"]) | TEXT,
     "matchValues": st.lists(TEXT, max_size=3), "boundaryValue": st.none() | TEXT, "requesterCwd": TEXT,
     "principal": PRINCIPAL},
    optional={"floor": TEXT, "askingUnits": st.lists(UNIT, min_size=1, max_size=3)},
)
PAYLOAD = st.fixed_dictionaries({
    "kind": st.sampled_from(["bash", "path", "forwarded", "skill"]),
    "request": st.fixed_dictionaries(
        {"requester": st.fixed_dictionaries({"forwarded": st.booleans()},
                                            optional={"agentName": st.none() | NAMES,
                                                      "sessionId": st.none() | TEXT}),
         "surface": TEXT, "value": TEXT},
        optional={"toolName": st.none() | TEXT, "invokedToolName": st.none() | TEXT,
                  "matchedPattern": st.none() | TEXT, "executedUnit": st.none() | TEXT,
                  "commandContext": st.none() | st.sampled_from(["subshell", "command_substitution"])}),
    "evidence": st.lists(st.fixed_dictionaries({"label": TEXT, "text": TEXT},
                                               optional={"detail": st.none() | TEXT}), max_size=2),
    "annotations": st.lists(st.fixed_dictionaries({"source": TEXT, "text": TEXT}), max_size=2),
})
GRANT = st.fixed_dictionaries({"surface": TEXT, "pattern": TEXT})
APPROVAL = (st.fixed_dictionaries({"grants": st.lists(GRANT, min_size=1, max_size=2)})
            | st.fixed_dictionaries({"surface": TEXT, "patterns": st.lists(TEXT, max_size=2)}))
HOP = st.fixed_dictionaries({"host": TEXT, "sessionId": TEXT, "node": TEXT})
HOPS = st.lists(HOP, min_size=1, max_size=3)
TIMES = (st.integers(min_value=0, max_value=2**60) | st.floats(min_value=0, max_value=1e15) | st.integers()
         | NUMBERS)
REQUEST = st.fixed_dictionaries(
    {"id": TEXT, "createdAt": TIMES, "requesterSessionId": TEXT, "targetSessionId": TEXT,
     "requesterAgentName": NAMES},
    optional={"message": st.none() | TEXT,
              "source": st.sampled_from(["tool_call", "skill_input", "skill_read", "other", None]),
              "surface": st.none() | TEXT, "value": st.none() | TEXT, "accessIntent": INTENT | st.none(),
              "payload": PAYLOAD | st.none(), "sessionApproval": APPROVAL | st.none(),
              "hops": HOPS | st.none()},
)
#: Names the model would also take (snake_case) or that no reader reads.
ODD_KEYS = st.sampled_from(["created_at", "requester_session_id", "access_intent", "session_approval",
                            "match_values", "boundary_value", "agent_name", "extra", "asking_units", "Id"])


def _objects(value: Any) -> list[dict[str, Any]]:
    """Every object inside `value`, outermost first."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found.extend(_objects(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_objects(item))
    return found


@st.composite
def files(draw: st.DrawFn) -> bytes:
    """A request file: a valid request, then a few hostile edits to its objects, then written out
    with duplicated keys (at the top or in a nested object), odd number literals, spacing and stray
    bytes as drawn."""
    request: dict[str, Any] = draw(REQUEST)
    for _ in range(draw(st.integers(0, 2))):
        target = draw(st.sampled_from(_objects(request)))
        edit = draw(st.sampled_from(["set", "delete", "null", "odd key", "snake_case"]))
        key = draw(st.sampled_from(sorted(target)) if target and edit != "odd key" else ODD_KEYS)
        if edit == "delete":
            target.pop(key, None)
        elif edit == "snake_case":  # the name the model would also take, not the one the reader reads
            target[to_snake(key)] = target.pop(key, None)
        else:
            target[key] = None if edit == "null" else draw(HOSTILE)
    written: Any = request
    if draw(st.booleans()):  # a key written twice: json keeps the last one
        pairs = Pairs(request.items())
        key, value = draw(st.sampled_from(pairs)) if pairs else ("id", "x")
        pairs.insert(draw(st.integers(0, len(pairs))), (key, draw(HOSTILE | st.just(value))))
        written = pairs
    nested = [obj for obj in _objects(request)[1:] if obj]
    if draw(st.booleans()) and nested:  # a key of a nested object (the facts, a unit...) written twice
        target = draw(st.sampled_from(nested))
        key = draw(st.sampled_from(sorted(target)))
        at = draw(st.integers(0, len(target)))
        written = _repeating(written, target, (at, key, draw(HOSTILE | st.just(target[key]))))
    if draw(st.integers(0, 9)) == 5:
        written = draw(HOSTILE)
    text = dumps(written, draw(st.sampled_from(["", "", " ", "\n", "\t", "\r\n", "\x0c", "\xa0", "\u2028"])))
    before, after = draw(st.sampled_from([("", "")] * 8 + [("", "\n"), (" ", ""), ("\ufeff", ""), ("", "x"),
                                          ("\t\r", " \n"), ("", "\x00"), ("\x00", ""), ("", "{}")]))
    data = (before + text + after).encode("utf-8")
    if draw(st.integers(0, 19)) == 5:
        data = data[: draw(st.integers(0, len(data)))] + b"\xff"
    return data


def _repeating(value: Any, target: dict[str, Any], repeat: tuple[int, str, Any]) -> Any:
    """`value` with the object `target` written with a key twice: `repeat` is where the extra
    member goes among its members, its key and its value (the last one written counts)."""
    if value is target:
        at, key, extra = repeat
        pairs = Pairs(target.items())
        pairs.insert(at, (key, extra))
        return pairs
    if isinstance(value, Pairs):
        return Pairs([(k, _repeating(v, target, repeat)) for k, v in value])
    if isinstance(value, dict):
        return {k: _repeating(v, target, repeat) for k, v in value.items()}
    if isinstance(value, list):
        return [_repeating(v, target, repeat) for v in value]
    return value


def refused(outcome: Any) -> bool:
    """Whether `_outcome` is a refusal (a plain tuple; a `ParsedRequest` is a named tuple)."""
    return type(outcome) is tuple


def _outcome(reader: Any, data: bytes) -> Any:
    try:
        return reader(data)
    except RequestRejected as exc:
        return ("rejected", exc.reason)
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc))


def assert_same(fast: Any, full: Any) -> None:
    """Equal values of the same types, to every field set, float sign and nested model."""
    assert type(fast) is type(full)
    if isinstance(fast, BaseModel):
        assert fast.__pydantic_fields_set__ == full.__pydantic_fields_set__
        assert (fast.__pydantic_extra__, fast.__pydantic_private__) == (full.__pydantic_extra__,
                                                                        full.__pydantic_private__)
        assert list(fast.__dict__) == list(full.__dict__)
        for name, value in fast.__dict__.items():
            assert_same(value, full.__dict__[name])
    elif isinstance(fast, tuple | list):
        assert len(fast) == len(full)
        for one, other in zip(fast, full, strict=True):
            assert_same(one, other)
    else:
        assert fast == full and repr(fast) == repr(full)


def check(data: bytes) -> Any:
    obj = decode_usual(data)
    if read_plain(data) is not None:
        event("plain path")
    event("fast path" if obj is not None and read_usual(obj, PRE_READ) is not None else "tolerant reader")
    full = same_reading(data)
    event(full[0] if refused(full) else "dropped" if full.dropped else "read whole")
    return full


def same_reading(data: bytes) -> Any:
    """What the tolerant reader makes of `data`, after checking `parse_request` makes the same."""
    fast, full = _outcome(parse_request, data), _outcome(read_tolerantly, data)
    if refused(full):
        assert fast == full
        return full
    assert fast.raw is data and full.raw is data
    assert fast.dropped == full.dropped
    assert_same(fast.request, full.request)
    assert fast == full
    return full


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(files())
def test_the_fast_path_reads_every_file_as_the_tolerant_reader_does(data: bytes) -> None:
    check(data)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(REQUEST)
def test_usual_requests_take_the_fast_path_and_read_the_same(request: dict[str, Any]) -> None:
    data = json.dumps(request, separators=(",", ":")).encode()
    full = check(data)
    obj = decode_usual(data)
    usual = None if obj is None else read_usual(obj, PRE_READ)
    if refused(full) or full.dropped:
        assert usual is None
    elif isinstance(request["createdAt"], Raw) or request.get("source") == "other":
        pass  # a literal the reader refuses or a source it drops: read by the tolerant reader
    elif _lone_surrogate(request):
        pass  # text UTF-8 cannot hold (pydantic's decoder refuses it): read by the tolerant reader
    else:
        assert usual is not None, "a usual, valid request left the fast path"


def _lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def test_a_file_over_the_size_limit_is_refused_with_its_size_as_before() -> None:
    body = json.dumps({"id": "r1", "createdAt": 1, "requesterSessionId": "c", "targetSessionId": "s",
                       "requesterAgentName": "Explore", "message": "x" * MAX_REQUEST_BYTES}).encode()
    assert decode_usual(body) is None
    reason = f"file is {len(body)} bytes, over the {MAX_REQUEST_BYTES}-byte limit"
    assert _outcome(parse_request, body) == _outcome(read_tolerantly, body) == ("rejected", reason)


def test_brackets_inside_strings_past_the_nesting_limit_are_read_by_the_tolerant_reader_alike() -> None:
    """Brackets are counted before decoding, strings included: many in a string only cost the
    tolerant reader's exact measure, never a different reading."""
    body = json.dumps({"id": "r1", "createdAt": 1, "requesterSessionId": "c", "targetSessionId": "s",
                       "requesterAgentName": "Explore", "message": "[{" * 200}).encode()
    assert decode_usual(body) is None
    fast, full = parse_request(body), read_tolerantly(body)
    assert fast == full and fast.request.message == "[{" * 200


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(files())
def test_the_plain_path_reads_only_files_the_tolerant_reader_reads_whole_and_alike(data: bytes) -> None:
    plain = read_plain(data)
    event("plain path" if plain is not None else "not plain")
    if plain is None:
        return
    full = read_tolerantly(data)
    assert not full.dropped
    assert_same(plain, full.request)


#: Requests of the plainest usual shape: what `read_plain` reads (a null only where the reader reads
#: it as absent, or as `boundaryValue`; no key the reader does not read).
PLAIN_INTENT = st.fixed_dictionaries(
    {"surface": st.sampled_from(["bash", "path_read", "mcp"]) | TEXT,
     "matchValues": st.lists(TEXT, max_size=3), "boundaryValue": st.none() | TEXT, "requesterCwd": TEXT,
     "principal": PRINCIPAL},
    optional={"floor": TEXT, "askingUnits": st.lists(UNIT, min_size=1, max_size=3)},
)
PLAIN_REQUEST = st.fixed_dictionaries(
    {"id": TEXT,
     "createdAt": st.integers(min_value=0, max_value=2**60) | st.floats(min_value=0, max_value=1e15),
     "requesterSessionId": TEXT, "targetSessionId": TEXT, "requesterAgentName": NAMES},
    optional={"message": st.none() | TEXT,
              "source": st.sampled_from(["tool_call", "skill_input", "skill_read"]),
              "surface": st.none() | TEXT, "value": st.none() | TEXT, "accessIntent": PLAIN_INTENT,
              "payload": PAYLOAD, "sessionApproval": APPROVAL, "hops": HOPS},
)


def _declined_by_its_bytes(data: bytes) -> bool:
    """What `read_plain` declines from a look at the bytes alone (`NaN` or `Infinity` anywhere, even
    inside a string: a key written twice could hide the literal; too many brackets; too long): the
    tolerant reader reads those."""
    return (len(data) > MAX_REQUEST_BYTES or data.count(b"[") + data.count(b"{") > MAX_WIRE_NESTING
            or b"NaN" in data or b"Infinity" in data)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(PLAIN_REQUEST, st.sampled_from(["", " ", "\n"]))
@example({"id": "", "createdAt": 0, "requesterSessionId": "", "targetSessionId": "NaN",
          "requesterAgentName": "Explore"}, "")
def test_plain_requests_take_the_plain_path_and_read_the_same(request: dict[str, Any], space: str) -> None:
    data = dumps(request, space).encode("utf-8", "surrogatepass")
    full = check(data)
    if refused(full) or full.dropped or _lone_surrogate(request) or _declined_by_its_bytes(data):
        assert read_plain(data) is None
        return
    plain = read_plain(data)
    assert plain is not None, "a plain, valid request left the plain path"
    assert_same(plain, full.request)


_PLAIN = {"id": "r1", "createdAt": 1, "requesterSessionId": "c", "targetSessionId": "s",
          "requesterAgentName": "Explore", "surface": None, "value": "ls",
          "accessIntent": {"surface": "bash", "matchValues": ["ls"], "boundaryValue": None,
                           "requesterCwd": "/w", "principal": {"sessionId": "c", "agentName": "Explore"}}}


def test_a_key_the_reader_does_not_read_leaves_the_plain_path_at_any_depth() -> None:
    """pydantic-core builds a model's part from its class's own validator (which ignores unknown
    keys) unless told otherwise: an unknown key, even holding a literal the reader refuses, is
    never read past here."""
    assert read_plain(json.dumps(_PLAIN).encode()) is not None
    for path in ((), ("accessIntent",), ("accessIntent", "principal")):
        for extra in ("1", "NaN", "1" * 5000, '"x"'):
            request = json.loads(json.dumps(_PLAIN))
            target = request
            for key in path:
                target = target[key]
            target["unread"] = Raw(extra)
            data = dumps(request).encode()
            assert read_plain(data) is None
            same_reading(data)
    snake = {**_PLAIN, "created_at": 1}
    del snake["createdAt"]
    assert read_plain(json.dumps(snake).encode()) is None


def test_the_shapes_the_reader_reads_its_own_way_are_read_alike() -> None:
    """Both shapes of `sessionApproval`, `hops` and `askingUnits` are read by the reader's own
    functions on the plain path; a null it drops, an empty grant list or surface, a grant with a key
    it does not read, and a missing `boundaryValue` are left to the others."""
    intent = dict(_PLAIN["accessIntent"])  # type: ignore[call-overload]
    grants = {"grants": [{"surface": "bash", "pattern": "ls *"}]}
    legacy = {"surface": "bash", "patterns": ["ls *", "ls"]}
    hops = [{"host": "h", "sessionId": "s", "node": "n"}]
    units = {**intent, "askingUnits": [{"command": "ls"}, {"command": "ls -l", "floor": "ask"}]}
    for request in ({**_PLAIN, "sessionApproval": grants}, {**_PLAIN, "sessionApproval": legacy},
                    {**_PLAIN, "hops": hops}, {**_PLAIN, "accessIntent": units}):
        data = json.dumps(request).encode()
        assert read_plain(data) is not None
        same_reading(data)
    for request in ({**_PLAIN, "source": None}, {**_PLAIN, "payload": None}, {**_PLAIN, "accessIntent": None},
                    {**_PLAIN, "sessionApproval": None}, {**_PLAIN, "hops": None},
                    {**_PLAIN, "sessionApproval": {"grants": []}},
                    {**_PLAIN, "sessionApproval": {**legacy, "surface": ""}},
                    {**_PLAIN, "sessionApproval": {"grants": [{"surface": "b", "pattern": "x", "why": 1}]}},
                    {**_PLAIN, "hops": hops * 9}, {**_PLAIN, "accessIntent": {**intent, "askingUnits": []}},
                    {**_PLAIN, "accessIntent": {**intent, "floor": None}},
                    {**_PLAIN, "accessIntent": {k: v for k, v in intent.items() if k != "boundaryValue"}}):
        data = json.dumps(request).encode()
        assert read_plain(data) is None
        same_reading(data)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=-(10**330), max_value=10**330).map(str)
       | st.floats(allow_nan=False, allow_infinity=False).map(repr)
       | st.tuples(st.integers(0, 10**20), st.integers(0, 10**20), st.integers(-340, 320)).map(
           lambda parts: f"{parts[0]}.{parts[1]}e{parts[2]}"))
def test_a_time_of_any_magnitude_is_read_to_the_same_float(literal: str) -> None:
    """pydantic's parser and the reader's round a long integer or decimal to the same float."""
    data = ('{"id":"a","createdAt":' + literal + ',"requesterSessionId":"c","targetSessionId":"s",'
            '"requesterAgentName":"E"}').encode()
    full = same_reading(data)
    plain = read_plain(data)
    if plain is not None:
        assert not refused(full) and repr(plain.created_at) == repr(full.request.created_at)


@pytest.mark.parametrize("odd", [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82",
                                 b"\x80", b"\xef\xbb\xbf", b"\x00", b"\x1f", b"\x7f"])
def test_bytes_in_a_string_are_read_alike(odd: bytes) -> None:
    """Bytes that are not UTF-8 (a surrogate, overlong, cut or past U+10FFFF) or a raw control
    character inside a string: refused alike; a BOM or a DEL inside one: read alike."""
    data = (b'{"id":"a' + odd + b'","createdAt":1,"requesterSessionId":"c","targetSessionId":"s",'
            b'"requesterAgentName":"E"}')
    full = same_reading(data)
    plain = read_plain(data)
    assert (plain is None) if refused(full) else (plain is not None and plain.id == full.request.id)
