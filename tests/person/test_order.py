"""The person's queue order (issue 37): kept as asks come and go, never sorted again on a refresh, and
always what sorting every pending ask by (`createdAt`, arrival) gives, ties in the order the names first
came (as the dictionary it replaced kept them)."""

from __future__ import annotations

import asyncio
import json
import random

from core.person import HumanAuthorizer
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
        human = HumanAuthorizer()
        model: dict[AskKey, Ask] = {}  # what `pending()` sorted before
        rng = random.Random(37)  # noqa: S311 (a reproducible walk, not a secret)
        for step in range(600):
            name = f"r{rng.randrange(40)}"
            key = AskKey(S, f"{name}.json")
            if rng.random() < 0.3 and key in model:
                human.withdraw(key)
                del model[key]
            else:  # a new ask, or another file under a pending name (served anew)
                ask = ask_for(name, rng.choice((1_000, 2_000, 3_000)), float(rng.randrange(5)))
                human.decide(ask)
                model[key] = ask
            expected = sorted(model.values(), key=lambda a: (a.request.created_at, a.arrived_at))
            assert human.pending() == expected, f"step {step}"
            assert list(human.ordered()) == expected and human.count() == len(model)

    asyncio.run(run())


def test_a_refresh_without_a_change_gets_the_same_tuple() -> None:
    async def run() -> None:
        human = HumanAuthorizer()
        late, early = ask_for("a", 2_000, 1.0), ask_for("b", 1_000, 2.0)
        human.decide(late)
        human.decide(early)
        first = human.ordered()
        assert first == (early, late) and human.ordered() is first  # no copy, no sort
        human.withdraw(early.key)
        assert human.ordered() == (late,) and human.ordered() is not first

    asyncio.run(run())
