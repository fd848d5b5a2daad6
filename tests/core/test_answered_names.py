"""The names a session answered lately (`ServedSession.answered`, bounded at `MAX_CONTESTED`, newest
last) are the same, in the same order, as the `OrderedDict` they were kept in before (moved to the end
when answered again, the oldest let go first), whatever batches and single answers are noted."""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.serving.loop import ServingCore
from core.serving.sessions import MAX_CONTESTED
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import unrun

_sessions = itertools.count()


def reference(kept: OrderedDict[str, None], names: list[str]) -> None:
    for name in names:
        kept[name] = None
        kept.move_to_end(name)
    while len(kept) > MAX_CONTESTED:
        kept.popitem(last=False)


@pytest.fixture
def core(tmp_path: Path) -> Iterator[ServingCore]:
    with unrun(ServingCore(tmp_path / "root", tmp_path / "state", DenyingArbiter())) as core:
        yield core


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32))
def test_answered_names_are_kept_as_the_ordered_dict_kept_them(core: ServingCore, seed: int) -> None:
    rnd = random.Random(seed)  # noqa: S311 (a reproducible sequence of answers, not a secret)
    served = core.add_session(f"answered-{next(_sessions)}")
    kept: OrderedDict[str, None] = OrderedDict()
    pool = [f"r{i}.json" for i in range(MAX_CONTESTED + MAX_CONTESTED // 4)]
    for _ in range(12):
        if rnd.random() < 0.3:
            name = rnd.choice(pool)
            served.note_answered(name)
            reference(kept, [name])
        else:
            batch = rnd.sample(pool, rnd.randint(1, 3000))
            served.note_answered_all(batch)
            reference(kept, batch)
        assert list(served.answered) == list(kept)
