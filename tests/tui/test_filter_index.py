"""The filter's index (issue 37): whatever is typed, deleted or arrives between keystrokes, the asks
it lets through are exactly those the filter itself matches, in the same order."""

from __future__ import annotations

import json
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from core.vocabulary.asks import Ask, AskKey, Judgment
from core.wire.reader import parse_request
from tests.tui.support import SERVED, request_body
from tui.widgets.ask_filter import AskFilter, FilterIndex

WORDS = ["make", "git", "push", "build-1", "agent:Bo", "agent:al", "surface:ba", "session:", "x", "ÄÖ"]


def ask(n: int, value: str, agent: str) -> Ask:
    parsed = parse_request(json.dumps(request_body(f"f-{n}", value=value, agent=agent)).encode())
    return Ask(key=AskKey(SERVED, f"f-{n}.json"), parsed=parsed, judgment=Judgment("ask"),
               arrived_at=time.time(), timeout_ms=600_000, responder_session_id=SERVED)


asks_st = st.lists(st.tuples(st.sampled_from(["make build-1", "git push", "make build-2", "äöx"]),
                             st.sampled_from(["Bob", "alice", "BOBBY"])), max_size=30)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(asks_st, st.lists(st.sampled_from(WORDS), max_size=3), st.integers(0, 4)),
                min_size=1, max_size=8))
def test_the_index_selects_exactly_what_the_filter_matches(steps: list[tuple[list[tuple[str, str]],
                                                                       list[str], int]]) -> None:
    index = FilterIndex()
    made: list[Ask] = []
    query = ""
    for arrivals, words, cut in steps:
        new = [ask(len(made) + i, value, agent) for i, (value, agent) in enumerate(arrivals)]
        index.add(new)
        made = [*made[: len(made) // 2 + 1], *new]  # some went, some came (a new tuple each time)
        pending = tuple(made)
        index.update(pending)
        query = (query[: max(0, len(query) - cut)] + " ".join(words)).strip()  # typed on or deleted
        for typed in (query[:n] for n in range(len(query) + 1)):  # each keystroke in turn
            flt = AskFilter.parse(typed)
            assert index.select(flt) == [a for a in pending if flt.matches(a)]
