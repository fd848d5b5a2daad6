"""A read's removals told to the core together (`Pipeline.settled`) say and do exactly what each told
alone says and does (`Pipeline._settled`, in order): no news only when every one was an answered
request's, and each answered record's name freed, whatever records, settling and answered names there
are and whichever names come (twice, too)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.serving.loop import ServingCore
from core.serving.pipeline import Pipeline
from core.serving.sessions import ServedSession
from core.serving.verdicts import Published, VerdictRecord
from core.vocabulary.asks import DenyingArbiter
from core.wire.reader import parse_request
from core.wire.response import deny
from tests.helpers import request_body, unrun

NAMES = [f"r{i}.json" for i in range(6)]
KINDS = st.sampled_from(["none", "taken", "published"])
_sessions = itertools.count()


def _served(
    core: ServingCore, records: dict[str, str], settling: set[str], answered: set[str],
) -> ServedSession:
    served = core.add_session(f"settled-{next(_sessions)}")
    for name, kind in records.items():
        if kind == "none":
            continue
        record = served.records.take(name)
        if kind == "published":
            body = request_body(name.removesuffix(".json"), served.inbox.session_id)
            parsed = parse_request(json.dumps(body).encode())
            served.records.arrive(record, parsed, 1.0)
            served.records.move(record, "decided")
            response = deny(responder="s", at_ms=1, decided_by=None)
            served.records.publish(record, Published(VerdictRecord(record.key, parsed, response, b"", "rule"),
                                                     True))
    served.settling.update(settling)
    for name in answered:
        served.note_answered(name)
    return served


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.dictionaries(st.sampled_from(NAMES), KINDS),
       settling=st.sets(st.sampled_from(NAMES)), answered=st.sets(st.sampled_from(NAMES)),
       removed=st.lists(st.sampled_from(NAMES), min_size=1, max_size=8))
def test_removals_told_together_are_told_as_each_alone(
    tmp_path_factory: pytest.TempPathFactory, records: dict[str, str], settling: set[str], answered: set[str],
    removed: list[str],
) -> None:
    root = tmp_path_factory.mktemp("settled")
    with unrun(ServingCore(root / "root", root / "state", DenyingArbiter())) as core:
        together = _served(core, records, settling, answered)
        alone = _served(core, records, settling, answered)
        said = core.pipeline.settled(together, removed)
        each = [Pipeline._settled(alone, name) for name in removed]
        assert said == all(each)
        assert sorted(together.records.names()) == sorted(alone.records.names())
