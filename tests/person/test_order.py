"""The person's queue order (issue 37): kept as asks come and go, never sorted again on a refresh, and
always what sorting every pending ask by (`createdAt`, arrival) gives, ties in the order the names first
came (as the dictionary it replaced kept them)."""

from __future__ import annotations

import asyncio
import json
import random

from core.person import Person
from core.vocabulary.asks import Ask, AskKey, Judgment
from core.wire.reader import parse_request
from tests.helpers import request_body

S = "s1"


def ask_for(name: str, created_ms: int, arrived: float) -> Ask:
    body = request_body(name, S, createdAt=created_ms)
    return Ask(AskKey(S, f"{name}.json"), parse_request(json.dumps(body).encode()), Judgment("ask"),
               arrived, 600_000, S)


def test_the_order_kept_is_the_sorted_order_through_arrivals_replacements_and_withdrawals() -> None:
    async def run() -> None:
        person = Person()
        model: dict[AskKey, Ask] = {}  # what `pending()` sorted before
        rng = random.Random(37)  # noqa: S311 (a reproducible walk, not a secret)
        for step in range(600):
            name = f"r{rng.randrange(40)}"
            key = AskKey(S, f"{name}.json")
            if rng.random() < 0.3 and key in model:
                person.withdraw(key)
                del model[key]
            else:  # a new ask, or another file under a pending name (served anew)
                ask = ask_for(name, rng.choice((1_000, 2_000, 3_000)), float(rng.randrange(5)))
                person.decide(ask)
                model[key] = ask
            expected = sorted(model.values(), key=lambda a: (a.request.created_at, a.arrived_at))
            assert person.pending() == expected, f"step {step}"
            assert list(person.ordered()) == expected and person.count() == len(model)

    asyncio.run(run())


def test_a_refresh_without_a_change_gets_the_same_tuple() -> None:
    async def run() -> None:
        person = Person()
        late, early = ask_for("a", 2_000, 1.0), ask_for("b", 1_000, 2.0)
        person.decide(late)
        person.decide(early)
        first = person.ordered()
        assert first == (early, late) and person.ordered() is first  # no copy, no sort
        person.withdraw(early.key)
        assert person.ordered() == (late,) and person.ordered() is not first

    asyncio.run(run())
