"""The state record of each request file: every transition in one place, illegal ones refused.

Hypothesis drives random sequences of operations over a few names (a name is reused once its record
ended) and checks, after every step, what serving relies on: no ask is published twice, a withdrawn
ask was never published, a final record never moves again, and the table holds exactly
the live records.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.serving.reconcile import awaiting, is_forged
from core.serving.records import NEXT, AskRecord, AskRecords, IllegalTransition, State
from core.serving.verdicts import Published, VerdictRecord
from core.wire.reader import parse_request
from core.wire.response import deny, encode_response
from tests.helpers import request_body

S = "019ff969-c34c-70be-9034-fae19c852932"
STATES: list[State] = list(NEXT)
PARSED = parse_request(json.dumps(request_body("r1", S)).encode())


def published(record: AskRecord) -> Published:
    response = deny(responder=S, at_ms=1, decided_by=None, reason="test")
    return Published(VerdictRecord(record.key, PARSED, response, encode_response(response), "rule"), True)


Op = tuple[str, str, State]
ops = st.tuples(
    st.sampled_from(["take", "move", "advance", "vanish", "release", "arrive", "publish"]),
    st.sampled_from(["a.json", "b.json"]),
    st.sampled_from(STATES),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=40))
@example([("take", "b.json", "taken"), ("move", "b.json", "decided"), ("move", "b.json", "shown"),
          ("vanish", "b.json", "taken")])  # a failed write, then the child withdrew: never answered
def test_random_transitions_keep_the_lifecycle(steps: list[Op]) -> None:
    table = AskRecords(S)
    seen: list[AskRecord] = []
    history: dict[int, list[State]] = {}
    for op, name, stage in steps:
        record = table.get(name)
        if record is None and seen and op != "take":
            record = next((r for r in reversed(seen) if r.key.name == name), None)  # an ended one
        before = None if record is None else record.state
        try:
            if op == "take":
                record = table.take(name)
                seen.append(record)
                history[id(record)] = ["taken"]
                continue
            if record is None:
                continue
            if op == "move":
                table.move(record, stage)
            elif op == "advance":
                moved = table.advance(record, stage)
                assert moved == (before not in ("withdrawn", "released"))
            elif op == "vanish":
                table.vanish(name)
            elif op == "release":
                table.release(record)
            elif op == "arrive":
                table.arrive(record, PARSED, 1.0)
            else:
                table.publish(record, published(record))
        except IllegalTransition:
            assert record is not None and record.state == before, "a refused move changes nothing"
            if op == "take":
                assert name in table
            continue
        if record is not None and record.state != before:
            assert before is not None and record.state in NEXT[before]
            history[id(record)].append(record.state)
        assert table.names() == {r.key.name for r in seen if r.live}
        for r in seen:
            assert (table.get(r.key.name) is r) == r.live
    for stages in history.values():
        assert stages.count("published") <= 1, f"published twice: {stages}"
        if "withdrawn" in stages:
            assert stages[-1] == "withdrawn", f"moved after its withdrawal: {stages}"
            # Decided before is possible (a decision that could not be written: back to the person),
            # answered never.
            assert "published" not in stages, f"withdrawn after its answer: {stages}"
        for final in ("withdrawn", "released"):
            assert final not in stages[:-1], f"moved after ending: {stages}"


def test_a_withdrawn_ask_is_never_decided() -> None:
    table = AskRecords(S)
    record = table.take("a.json")
    table.arrive(record, PARSED, 1.0)
    table.move(record, "judged")
    table.move(record, "shown")
    assert table.vanish("a.json") is record and record.state == "withdrawn"
    with pytest.raises(IllegalTransition):
        table.move(record, "decided")
    assert not table.advance(record, "decided") and record.state == "withdrawn"
    again = table.take("a.json")  # the name is free: a new file under it is a new record
    assert again is not record and table.get("a.json") is again


def test_a_decided_ask_that_vanishes_keeps_its_name_until_its_answer_is_reported() -> None:
    """Its answer is being published: a file back under the name meanwhile is not a new ask."""
    table = AskRecords(S)
    record = table.take("a.json")
    table.arrive(record, PARSED, 1.0)
    table.move(record, "decided")
    assert table.vanish("a.json") is record and record.state == "decided" and record.vanished
    with pytest.raises(IllegalTransition):
        table.take("a.json")
    table.move(record, "withdrawn")  # nothing could be written: the child gave up unanswered
    assert "a.json" not in table


def test_an_answer_published_during_the_forgery_listing_is_not_a_forgery() -> None:
    """The race `detect_forgeries` closes: held asks are taken, then `responses/` is listed (off the
    loop); meanwhile ours is answered and its response placed. The check reads the stage after the listing."""
    table = AskRecords(S)
    ours, other = table.take("r1.json"), table.take("r2.json")
    for record in (ours, other):
        table.arrive(record, PARSED, 1.0)
        table.move(record, "judged")
    table.move(record, "shown")
    assert awaiting(table) == [ours, other]
    table.move(ours, "decided")  # the person decided; the publisher placed the response...
    listing = frozenset({"r1.json"})  # ...and the listing saw it
    assert not is_forged(ours, listing)
    table.publish(ours, published(ours))
    assert not is_forged(ours, listing)
    assert is_forged(other, listing)  # same request id, still held: someone else wrote it
