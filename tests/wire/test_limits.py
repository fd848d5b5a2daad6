"""What one request may ask (`core.wire.limits.over_limit`): the same reason, or none, as measuring
every value in turn, for asks with values of every size around the limits."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from core.wire.facts import AskingUnit
from core.wire.limits import (
    MAX_ASKING_UNITS,
    MAX_FACTS_CHARS,
    MAX_MATCH_VALUES,
    MAX_VALUE_CHARS,
    over_limit,
)
from core.wire.request import ForwardedAccessIntent, Principal


def measured_in_turn(intent: ForwardedAccessIntent) -> str | None:
    """The limits as written before the usual ask's shortcut: every text's length, then the longest,
    then the total."""
    values, units = intent.match_values, intent.asking_units or ()
    if len(values) > MAX_MATCH_VALUES:
        return f"accessIntent.matchValues has {len(values)} entries, over the limit of {MAX_MATCH_VALUES}"
    if len(units) > MAX_ASKING_UNITS:
        return f"accessIntent.askingUnits has {len(units)} entries, over the limit of {MAX_ASKING_UNITS}"
    texts = [*values, *(u.command for u in units)]
    if intent.boundary_value is not None:
        texts.append(intent.boundary_value)
    lengths = [len(text) for text in texts]
    longest, total = max(lengths, default=0), sum(lengths)
    if longest > MAX_VALUE_CHARS:
        return f"a value of accessIntent is {longest} characters long, over the limit of {MAX_VALUE_CHARS}"
    if total > MAX_FACTS_CHARS:
        return f"the values of accessIntent total {total} characters, over the limit of {MAX_FACTS_CHARS}"
    return None


def _many(text: str) -> Callable[[int], list[str]]:
    return lambda count: [text] * count


SIZES = st.sampled_from([0, 1, 5, MAX_VALUE_CHARS - 1, MAX_VALUE_CHARS, MAX_VALUE_CHARS + 1,
                         MAX_FACTS_CHARS // 4, MAX_FACTS_CHARS // 4 + 1])
TEXTS = SIZES.map(lambda n: "x" * n)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, max_size=6) | st.integers(MAX_MATCH_VALUES, MAX_MATCH_VALUES + 1).map(_many("a")),
       st.none() | st.lists(TEXTS, min_size=1, max_size=4)
       | st.integers(MAX_ASKING_UNITS, MAX_ASKING_UNITS + 1).map(_many("u")),
       st.none() | TEXTS)
def test_the_limits_say_what_measuring_every_value_in_turn_says(
    values: list[str], commands: list[str] | None, boundary: str | None
) -> None:
    intent = ForwardedAccessIntent(
        surface="bash", match_values=tuple(values), boundary_value=boundary, requester_cwd="/w",
        principal=Principal(session_id="c", agent_name="Explore"))
    if commands is not None:
        intent = intent.model_copy(update={"asking_units": tuple(AskingUnit(c) for c in commands)})
    assert over_limit(intent) == measured_in_turn(intent)


def test_no_facts_is_within_the_limits() -> None:
    assert over_limit(None) is None
