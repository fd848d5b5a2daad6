"""The per-ask shortcuts of the history's write path keep what it writes: the queue hands a batch its
own arrivals (in the order observed, the rest left queued in order), a decider described once per
source is the one described afresh, the shared JSON encoder writes `json.dumps`'s text, a burst's row
as a plain tuple holds what the arrival's and the verdict's columns hold, and a burst whose text
SQLite refuses (a lone surrogate) is stored all the same. A note on one request takes that request's
queued events alone, in order."""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.history import HistoryStore
from core.history.rows import (
    _PLAIN_FACTS,
    VERDICT_ROW,
    _describe,
    _facts_json,
    arrival_values,
    decision_columns,
    dumps,
    facts_json,
    verdict_columns,
    verdict_row,
)
from core.history.schema import migrate
from core.history.table import AsksTable
from core.history.transactions import Queued
from core.seams import Seams
from core.serving.verdicts import VerdictRecord, WrittenMark
from core.testing import ManualClock
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.decisions import ForwardedDecision, RuleDecision, UnavailableDecision, UserDecision
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response

S = "019ff969-c34c-70be-9034-fae19c852932"


def arrival(name: str, at: float) -> ServeEvent:
    raw = json.dumps({"id": name, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
                      "requesterAgentName": "Explore", "message": f"run {name}", "surface": "bash",
                      "value": name}).encode()
    parsed = parse_request(raw)
    return ServeEvent("arrived", AskKey(S, f"{name}.json"), at, parsed=parsed, raw=raw)


def answered(name: str, at: float) -> ServeEvent:
    return ServeEvent("answered", AskKey(S, f"{name}.json"), at, reason="refused")


def test_a_batch_claims_its_own_lone_arrivals_and_leaves_the_rest_in_order() -> None:
    a, b, c, a_again, d = (arrival(n, t) for n, t in (("a", 1), ("b", 2), ("c", 3), ("a", 4), ("d", 5)))
    refused = answered("c", 3.5)
    queue = Queued([a, b, c, refused, a_again, d])
    # `a` twice, `c` with a fail-safe close: written first, in order; `d` alone: claimed.
    taken = queue.take_claims({c.key, a.key, d.key, AskKey(S, "never.json")})
    assert taken == ([d], [a, c, refused, a_again])
    assert list(queue) == [b]
    queue.append(arrival("e", 6))
    queue.append(answered("f", 7))
    assert [event.key.name for event in queue.take(lambda event: event.at < 6)] == ["b.json"]
    assert queue.take_claims({AskKey(S, "f.json")}) == ([], [])  # no arrival of its own: left queued
    assert [event.key.name for event in queue] == ["e.json", "f.json"]
    assert len(queue) == 2


Step = tuple[str, frozenset[str], bool]  # what is done, to which names, an arrival (else a close)
NAMES = st.frozensets(st.sampled_from("abcde"))
STEPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.sampled_from("abcd").map(lambda name: frozenset({name})), st.booleans()),
    st.tuples(st.sampled_from(["claims", "keys", "due", "refused"]), NAMES, st.just(False)),
), max_size=40)


def _claims(model: list[ServeEvent], keys: set[AskKey]) -> tuple[list[ServeEvent], list[ServeEvent]]:
    """What `take_claims` takes, by a look at every event: per key with an arrival, a lone arrival
    (nothing else of its key queued) is claimed, else all of its key's events go first, in order."""
    mine = {key: [event for event in model if event.key == key] for key in keys}
    lone = {key for key, events in mine.items() if [event.kind for event in events] == ["arrived"]}
    first = {key for key, events in mine.items() if key not in lone and
             any(event.kind == "arrived" for event in events)}
    if not any(event.kind == "arrived" for event in model):
        return [], []
    return ([event for event in model if event.key in lone],
            [event for event in model if event.key in first])


def _of(keys: set[AskKey], event: ServeEvent) -> bool:
    return event.key in keys


@settings(max_examples=400, deadline=None)
@given(steps=STEPS)
def test_the_queue_takes_what_a_filter_of_its_events_in_order_takes(steps: list[Step]) -> None:
    """Whatever order of appends and takes, and of takes put back in front (a refused COMMIT): a
    batch's claims (`take_claims`), a note's events of its keys (`take_keys`) and the worker's due ones
    (`take`) are what a filter of the events in the order observed takes, the rest stay in that order,
    and every index entry points at a queued event of its key."""
    queue, model, at = Queued(), list[ServeEvent](), 0.0
    for step, names, is_arrival in steps:
        keys = {AskKey(S, f"{name}.json") for name in names}
        if step == "append":
            at += 1
            event = (arrival if is_arrival else answered)(min(names), at)
            queue.append(event)
            model.append(event)
            continue
        if step == "claims":
            claimed, first = queue.take_claims(keys)
            assert (claimed, first) == _claims(model, keys)
            taken = [*first, *claimed]
        elif step == "keys":
            taken = queue.take_keys(keys)
            assert taken == [event for event in model if event.key in keys]
        elif step == "due":
            taken = queue.take(functools.partial(_of, keys))
            assert taken == [event for event in model if event.key in keys]
        else:  # a transaction refused: what it took goes back in front, as `transaction` puts it
            taken = queue.take_keys(keys)
            queue = Queued([*taken, *queue])
            model = [*[event for event in model if event.key in keys],
                     *[event for event in model if event.key not in keys]]
            taken = []
        model = [event for event in model if event not in taken]
        assert list(queue) == model and len(queue) == len(model)
        for where in (queue._arrivals, queue._others):
            for key, found in where.items():
                indexes = [found] if isinstance(found, int) else found
                assert indexes and all(queue._events[index].key == key for index in indexes)

def stored(path: Path) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT id, request_name, outcome, verdict FROM asks ORDER BY id").fetchall()


@pytest.mark.asyncio
async def test_batches_taken_from_the_middle_of_a_deep_queue_write_the_rest_in_order(tmp_path: Path) -> None:
    """A burst: many arrivals queued, batches decided out of order; each verdict is one row with its
    arrival, and the arrivals left (asks at a person) are written in the order observed."""
    clock = ManualClock(wall=10.0)
    path = tmp_path / "history.sqlite3"
    store = HistoryStore(path, seams=Seams(clock=clock))
    events = [arrival(f"r{i}", 10.0 + i / 100) for i in range(40)]
    for event in events:
        store.observe(event)
    response = approve(responder=S, at_ms=0, decided_by=RuleDecision(surface="bash", pattern="*", origin="g"))
    body = encode_response(response)
    for batch in (events[30:35], events[5:10], events[20:22]):
        verdicts = []
        for event in batch:
            store.expect(event.key)
            assert event.parsed is not None
            verdicts.append(VerdictRecord(event.key, event.parsed, response, body, "rule"))
        store.record_verdicts(verdicts)
    decided = [f"r{i}.json" for i in (*range(30, 35), *range(5, 10), 20, 21)]
    assert [name for _, name, _, _ in stored(path)] == decided
    store.write_arrivals()
    rows = stored(path)
    assert [name for _, name, _, _ in rows[len(decided):]] == [
        e.key.name for e in events if e.key.name not in decided]
    assert {(o, v) for _, name, o, v in rows if name in decided} == {("rule", "approved")}
    assert {outcome for _, name, outcome, _ in rows if name not in decided} == {"pending"}
    store.close()


@pytest.mark.parametrize("outcome", ["rule", "user", "fail-safe", "courier"])
def test_a_source_is_described_as_afresh(outcome: str) -> None:
    rule = RuleDecision(surface="bash", pattern="git *", origin="session")
    sources = [
        rule, RuleDecision(surface="bash", pattern="git *", origin="session"),
        UserDecision(via="dialog"), UnavailableDecision(reason="no one to ask"),
        ForwardedDecision(responder_session_id="up", decision=rule), None,
    ]
    for source in sources:
        for carried_to in (None, "nats://a", "nats://b"):
            assert decision_columns(source, outcome, carried_to) == _describe(source, outcome, carried_to)
    forwarded = ForwardedDecision(responder_session_id="up", decision=rule)
    assert decision_columns(forwarded, "courier", "nats://a")[1] != decision_columns(forwarded, "courier", "nats://b")[1]
    for other in ("rule", "rule_written", outcome, "rule"):  # the very same source, one outcome after another
        assert decision_columns(rule, other) == _describe(rule, other, None)


@pytest.mark.parametrize("value", [
    {"a": "ü\u2028\x00\"\\", "n": [1, 2.5, 1e16, -0.0, None, True], "nested": {"k": ()}},
    {"surrogate": "x\udc80y", "emoji": "😀"},
    ["plain", 3],
])
def test_dumps_writes_what_json_dumps_writes(value: object) -> None:
    assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_a_burst_of_plain_marks_notes_what_one_mark_at_a_time_notes(tmp_path: Path) -> None:
    """Plain marks (linked, no why) are noted in one statement: the same rows as the statement per mark
    (the newest row with a response per request id; a contested row never says written)."""
    results = []
    for per_mark in (False, True):
        clock = ManualClock(wall=10.0)
        path = tmp_path / f"{per_mark}.sqlite3"
        store = HistoryStore(path, seams=Seams(clock=clock))
        response = approve(responder=S, at_ms=0, decided_by=UserDecision(via="dialog"))
        body = encode_response(response)
        events = [arrival(f"m{i}", 10.0) for i in range(6)]
        verdicts = []
        for event in events:
            store.observe(event)
            assert event.parsed is not None
            verdicts.append(VerdictRecord(event.key, event.parsed, response, body, "user"))
        store.record_verdicts(verdicts)
        store.record_verdicts(verdicts[:1])  # decided again (its write failed): the same row
        store.observe(ServeEvent("contested", events[1].key, 10.5, reason="another server answered"))
        clock.advance(1)
        marks = [WrittenMark(v.key, v.request_id, True) for v in (*verdicts[:4], verdicts[0])]
        if per_mark:  # a mark with a why takes the statement per mark for the whole batch
            marks.append(WrittenMark(AskKey(S, "gone.json"), "gone", False, "never answered"))
        store.mark_written(marks)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            sql = "SELECT id, request_name, outcome, written, ended_at, reason FROM asks ORDER BY id"
            results.append(conn.execute(sql).fetchall())
        store.close()
    assert results[0] == results[1]
    noted = {(name, written) for _, name, _, written, _, _ in results[0]}
    assert ("m1.json", 0) in noted and ("m2.json", 1) in noted and ("m5.json", None) in noted


def request_bytes(name: str, **fields: object) -> bytes:
    body: dict[str, object] = {
        "id": name, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
        "requesterAgentName": "Explore", "message": f"run {name}", "surface": "bash", "value": name,
    }
    return json.dumps({**body, **fields}).encode()


INTENT = {"surface": "bash", "matchValues": ["git status \u00fc\u2028\x01\"\\"], "boundaryValue": None,
          "requesterCwd": "/w", "principal": {"sessionId": "child", "agentName": "Explore"}}
KINDS: dict[str, dict[str, object]] = {
    "plain": {},
    "intent": {"accessIntent": INTENT},
    "grants, dropped": {"accessIntent": INTENT, "source": "elsewhere", "message": 3,
                        "sessionApproval": {"grants": [{"surface": "bash", "pattern": "git *"}]}},
    "surrogate": {"accessIntent": {**INTENT, "matchValues": ["git \udc80"]}, "message": "x\udc80"},
}


WIRE_TEXT = st.text(max_size=5) | st.sampled_from(
    ["\ud800", "\x00", "\x1f\x7f", "\u2028\u2029", '"\\/', "é😀"])
PRINCIPAL = st.fixed_dictionaries({"sessionId": WIRE_TEXT, "agentName": WIRE_TEXT})
UNITS = st.lists(st.fixed_dictionaries({"command": WIRE_TEXT}, optional={"floor": WIRE_TEXT}),
                 min_size=1, max_size=2)
GRANTS = st.lists(st.fixed_dictionaries({"surface": WIRE_TEXT.filter(bool), "pattern": WIRE_TEXT}),
                  min_size=1, max_size=2)


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries(
    {"surface": WIRE_TEXT, "matchValues": st.lists(WIRE_TEXT, max_size=3),
     "boundaryValue": st.none() | WIRE_TEXT, "requesterCwd": WIRE_TEXT, "principal": PRINCIPAL},
    optional={"floor": WIRE_TEXT, "askingUnits": UNITS}),
    st.fixed_dictionaries({}, optional={
        "source": st.sampled_from(["tool_call", "elsewhere"]), "surface": WIRE_TEXT, "value": WIRE_TEXT,
        "message": WIRE_TEXT | st.integers(), "sessionApproval": st.fixed_dictionaries({"grants": GRANTS})}))
def test_the_facts_column_is_the_text_of_the_dumped_facts(intent: dict[str, object],
                                                          fields: dict[str, object]) -> None:
    """pydantic's serializer writes the facts column as `dumps` writes the dumped intent: the same
    escapes (quotes, controls, U+2028 unescaped, non-ASCII as is), and a lone surrogate by `dumps`."""
    parsed = parse_request(request_bytes("r1", accessIntent=intent, **fields))
    assert facts_json(parsed) == _facts_json(parsed)
    assert json.loads(facts_json(parsed))["accessIntent"]["matchValues"] == intent["matchValues"] \
        or parsed.access_intent is None


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "source": st.sampled_from(["tool_call", "elsewhere"]), "surface": WIRE_TEXT, "value": WIRE_TEXT,
    "requesterAgentName": WIRE_TEXT, "sessionApproval": st.fixed_dictionaries({"grants": GRANTS})}))
def test_the_facts_column_of_an_ask_without_an_intent_is_the_text_of_the_dumped_facts(
    fields: dict[str, object],
) -> None:
    """The hand-written facts of an ask with no intent (the fail-safe's usual ask) against `dumps`."""
    parsed = parse_request(request_bytes("r1", **fields))
    assert parsed.access_intent is None
    assert facts_json(parsed) == _facts_json(parsed)


@settings(max_examples=200, deadline=None)
@given(st.none() | st.fixed_dictionaries(
    {"surface": WIRE_TEXT, "matchValues": st.lists(WIRE_TEXT, max_size=3),
     "boundaryValue": st.none() | WIRE_TEXT, "requesterCwd": WIRE_TEXT, "principal": PRINCIPAL},
    optional={"floor": WIRE_TEXT, "askingUnits": UNITS}),
    st.fixed_dictionaries({}, optional={
        "source": st.sampled_from(["tool_call", "elsewhere"]), "surface": WIRE_TEXT, "value": WIRE_TEXT,
        "message": WIRE_TEXT | st.integers(), "sessionApproval": st.fixed_dictionaries({"grants": GRANTS})}))
def test_a_burst_row_holds_what_the_arrival_and_the_verdict_columns_hold_for_any_ask(
    intent: dict[str, object] | None, fields: dict[str, object],
) -> None:
    """`verdict_row` (the facts' columns written out in place) against the two dicts it replaces, for
    asks with and without an intent, with anything in their text."""
    parsed = parse_request(request_bytes("r1", **({"accessIntent": intent} if intent else {}), **fields))
    key = AskKey(S, "r1.json")
    response = deny(responder=S, at_ms=0, decided_by=None, reason="no")
    verdict = VerdictRecord(key, parsed, response, encode_response(response), "fail-safe")
    expected = arrival_values(key, parsed, 10.0, parsed.raw)
    expected.update(verdict_columns(verdict, 12.5, 10.0))
    assert expected.pop("written") is None
    assert dict(zip(VERDICT_ROW, verdict_row(verdict, parsed, 10.0, None, 12.5), strict=True)) == expected


def test_the_usual_facts_are_written_by_hand() -> None:
    """The wire models still have the fields the hand-written facts write (else it is off, and the
    property test above compares pydantic's text with itself)."""
    assert _PLAIN_FACTS


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_burst_row_holds_what_the_arrival_and_the_verdict_columns_hold(kind: str) -> None:
    parsed = parse_request(request_bytes("r1", **KINDS[kind]))
    assert facts_json(parsed) == _facts_json(parsed)  # the intent encoded by its model: the same text
    key = AskKey(S, "r1.json")
    response = approve(responder=S, at_ms=0, decided_by=RuleDecision(surface="bash", pattern="*", origin="g"))
    verdict = VerdictRecord(key, parsed, response, encode_response(response), "rule")
    expected = arrival_values(key, parsed, 10.0, parsed.raw)
    expected.update(verdict_columns(verdict, 12.5, 10.0))
    assert expected.pop("written") is None
    assert dict(zip(VERDICT_ROW, verdict_row(verdict, parsed, 10.0, None, 12.5), strict=True)) == expected


@pytest.mark.asyncio
async def test_a_burst_with_a_lone_surrogate_is_stored_whole(tmp_path: Path) -> None:
    """SQLite refuses a lone surrogate (the real child writes one): the batch's rows are stored all the
    same, that text as its `\\udXXX` escape, each row once."""
    path = tmp_path / "history.sqlite3"
    store = HistoryStore(path, seams=Seams(clock=ManualClock(wall=10.0)))
    raws = [request_bytes(f"r{i}", **(KINDS["surrogate"] if i == 2 else {})) for i in range(4)]
    events = [ServeEvent("arrived", AskKey(S, f"r{i}.json"), 10.0, parsed=parse_request(raw), raw=raw)
              for i, raw in enumerate(raws)]
    response = approve(responder=S, at_ms=0, decided_by=RuleDecision(surface="bash", pattern="*", origin="g"))
    verdicts = []
    for event in events:
        store.observe(event)
        store.expect(event.key)
        assert event.parsed is not None
        verdicts.append(VerdictRecord(event.key, event.parsed, response, encode_response(response), "rule"))
    store.record_verdicts(verdicts)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT request_name, outcome, message, value FROM asks ORDER BY id").fetchall()
    store.close()
    assert [(name, outcome) for name, outcome, _, _ in rows] == [(f"r{i}.json", "rule") for i in range(4)]
    assert rows[2][2:] == ("x\\udc80", "git \\udc80")


@settings(max_examples=150, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=40)), st.sampled_from(["written", "contested"]))
def test_marks_by_row_land_in_exactly_those_rows(marked: set[int], outcome: str) -> None:
    """`mark_written_rows` (one statement for a run of ids, a statement per run otherwise) notes
    exactly the rows it is given, and a contested row never says its answer was delivered."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    conn.executemany(
        "INSERT INTO asks (id, served_session, request_name, arrived_at, outcome, response) "
        "VALUES (?, 's', ?, 1.0, ?, x'7b7d')",
        [(i, f"r{i}.json", outcome if i % 3 == 0 else "rule") for i in range(1, 41)])
    AsksTable(conn).mark_written_rows(list(marked), 5.0)
    rows = conn.execute("SELECT id, written, ended_at, outcome FROM asks ORDER BY id").fetchall()
    assert {row_id for row_id, _, ended, _ in rows if ended == 5.0} == marked
    for row_id, written, _, kind in rows:
        assert written == (None if row_id not in marked else 0 if kind == "contested" else 1)
