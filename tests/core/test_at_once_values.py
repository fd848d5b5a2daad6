"""The at-once lane's values built in place (`core.serving.at_once`): each equal to the one it replaces.

`AtOnce.serve` makes each `VerdictRecord` (a named tuple) with `tuple.__new__`; `new_ask` writes a
frozen dataclass's fields into a new instance's `__dict__`; `AtOnce.serve` checks in place what
`rejection` says of a file. Each is compared with the
slow form on generated values: a field added to the class and not written, or a check that parts
from `rejection`, fails here.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.forwarding.inbox import SessionInbox
from core.serving.at_once import AtOnce, new_ask
from core.serving.intake import FileRead, Intake, read_guarded, rejection
from core.serving.verdicts import VerdictRecord
from core.testing import AllowAll, ManualClock
from core.vocabulary.asks import Ask, AskKey, DenyingArbiter, Judgment, LeavingArbiter
from core.wire.reader import parse_request
from tests.helpers import request_body

SESSION = "serving-session"
texts = st.text(max_size=12)
#: Names and ids near the edges of a request id: unsafe characters, dots, the suffix twice or not at all.
stems = st.one_of(st.from_regex(r"[A-Za-z0-9._-]{1,8}", fullmatch=True), st.sampled_from(
    [".", "..", "a/b", "a b", "", "x.json", "é", "a\x00"]), texts)


def parsed_request(request_id: str, target: str) -> FileRead:
    raw = json.dumps(request_body(request_id, target)).encode()
    return FileRead(raw=raw, parsed=parse_request(raw), identity=(1, 2, 3))


@settings(max_examples=200, deadline=None)
@given(stem=st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True), at=st.floats(min_value=1e9, max_value=2e9),
       allow=st.booleans())
def test_the_lanes_verdict_records_are_the_constructed_ones(stem: str, at: float, allow: bool) -> None:
    """Each record the lane makes in C is the `VerdictRecord` its constructor makes of the same fields:
    a field added to the class and not passed fails here."""
    read = parsed_request(stem, SESSION)
    assert read.parsed is not None
    judge = AllowAll() if allow else Asks()
    lane = AtOnce(SESSION, judge, ManualClock(at), 60_000, DenyingArbiter(ManualClock(at)).decide_at_once)
    inbox = SessionInbox(Path("/nonexistent"), SESSION)
    [built] = lane.serve(inbox, Intake([(f"{stem}.json", read)], frozenset(), {})).at_once
    made = VerdictRecord(AskKey(SESSION, f"{stem}.json"), read.parsed, built.response, built.body,
                         built.outcome, built.carried_to, at, read.raw)
    assert type(built) is VerdictRecord and type(built.key) is AskKey
    assert len(built) == len(VerdictRecord._fields)
    assert built == made and built.request_id == stem
    assert built.outcome == ("rule" if allow else "fail-safe") and not built.by_person


@settings(max_examples=200, deadline=None)
@given(session=texts, name=texts, arrived=st.floats(allow_nan=False), timeout=st.integers(),
       responder=texts)
def test_an_ask_built_in_place_is_the_constructed_one(
    session: str, name: str, arrived: float, timeout: int, responder: str,
) -> None:
    key = AskKey(session, name)
    parsed = parsed_request("r1", SESSION).parsed
    assert parsed is not None
    judgment = Judgment(verdict="ask", explanation=("why",))
    made = Ask(key, parsed, judgment, arrived, timeout, responder)
    built = new_ask(key, parsed, judgment, arrived, timeout, responder)
    assert type(built) is Ask
    assert set(vars(built)) == {f.name for f in fields(Ask)}
    for f in fields(Ask):
        assert getattr(built, f.name) is getattr(made, f.name)
    assert built == made and built.deadline_ms == made.deadline_ms


@settings(max_examples=300, deadline=None)
@given(files=st.lists(st.tuples(stems, st.one_of(st.just("same"), stems),
                                st.sampled_from([SESSION, f" {SESSION}\n", "another", ""])),
                      min_size=1, max_size=6))
def test_the_lane_takes_exactly_the_files_rejection_lets_through(files: list[tuple[str, str, str]]) -> None:
    """Every usable file a rule decides is taken at once; every file `rejection` refuses is left for
    the route (which says why), whatever its name, id and target."""
    reads = []
    for stem, request_id, target in files:
        name = f"{stem}.json"
        reads.append((name, parsed_request(stem if request_id == "same" else request_id, target)))
    lane = AtOnce(SESSION, AllowAll(), ManualClock(), 60_000, DenyingArbiter().decide_at_once)
    served = lane.serve(SessionInbox(Path("/nonexistent"), SESSION), Intake(reads, frozenset(), {}))
    taken = [verdict.key.name for verdict in served.at_once]
    assert taken == [name for name, read in reads if rejection(name, read, SESSION) is None]
    assert [name for name, _ in served.reads] == [
        name for name, read in reads if rejection(name, read, SESSION) is not None]
    assert not served.judged


def test_a_file_the_reader_refuses_is_left_for_the_route(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_bytes(b"{not json")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        read = read_guarded(fd, "bad.json")
        (tmp_path / "good.json").write_bytes(json.dumps(request_body("good", SESSION)).encode())
        usual = read_guarded(fd, "good.json")
    finally:
        os.close(fd)
    assert read.parsed is None and read.rejection is not None
    assert read.rejection.startswith("unusable request")
    assert type(usual) is FileRead and usual.parsed is not None and not usual.gone and usual.rejection is None
    assert usual == FileRead(raw=usual.raw, parsed=usual.parsed, identity=usual.identity)
    lane = AtOnce(SESSION, AllowAll(), ManualClock(), 60_000, None)
    served = lane.serve(SessionInbox(tmp_path, SESSION),
                        Intake([("bad.json", read), ("good.json", usual)], frozenset(), {}))
    assert [name for name, _ in served.reads] == ["bad.json"]
    assert [verdict.key.name for verdict in served.at_once] == ["good.json"]


class Asks:
    """The judge of a node whose rules decide nothing: every ask goes to the arbiter."""

    def judge(self, parsed: object, session_id: str) -> Judgment:
        return Judgment("ask")


@settings(max_examples=100, deadline=None)
@given(ids=st.lists(st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True), min_size=1, max_size=5,
                    unique=True),
       leave=st.booleans(), at=st.floats(min_value=1e9, max_value=2e9))
def test_the_fail_safe_and_leave_decide_without_an_ask_as_with_one(
    ids: list[str], leave: bool, at: float
) -> None:
    """The lane asks the fail-safe (and leave) for its decision without building an `Ask`
    (`decide_unasked`): the very decisions `decide_at_once` takes of each ask, so the same verdicts."""
    clock = ManualClock(at)
    reads = [(f"{stem}.json", parsed_request(stem, SESSION)) for stem in ids]
    arbiter = LeavingArbiter() if leave else DenyingArbiter(clock)
    for name, read in reads:
        assert read.parsed is not None
        ask = new_ask(AskKey(SESSION, name), read.parsed, Judgment("ask"), at, 60_000, SESSION)
        assert arbiter.decide_unasked(SESSION) == arbiter.decide_at_once(ask)
    inbox = SessionInbox(Path("/nonexistent"), SESSION)
    fast = AtOnce(SESSION, Asks(), clock, 60_000, arbiter.decide_at_once)
    slow = AtOnce(SESSION, Asks(), clock, 60_000, lambda ask: arbiter.decide_at_once(ask))
    assert fast.unasked is not None and slow.unasked is None
    one = fast.serve(inbox, Intake(reads, frozenset(), {}))
    other = slow.serve(inbox, Intake(reads, frozenset(), {}))
    assert one == other
    assert len(one.at_once) == (0 if leave else len(ids))
