"""The safety rescan with thousands waiting (issue 37): it looks at the files of the asks awaiting a
decision a share at a time (`IDENTITY_CHECKS`, `SPREAD_PASSES`), so a quiet queue costs little each
second; a request rewritten in place, which no listing shows, is still found within one round of
passes, and a rescan a file event asks for looks at every file at once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.person import Person
from core.serving import ServingCore
from core.serving.drain import IDENTITY_CHECKS, SPREAD_PASSES
from core.vocabulary.asks import AskKey
from tests.helpers import write_request

S = "s1"
WAITING = IDENTITY_CHECKS * 3


def rewrite_in_place(path: Path, value: str) -> None:
    """Same inode, same name: only the file's own identity (size, mtime) says it changed."""
    body = json.loads(path.read_bytes())
    body["value"] = value
    with path.open("r+b") as file:
        file.write(json.dumps(body).encode())
        file.truncate()


def shown_value(person: Person, key: AskKey) -> str | None:
    ask = person.get(key)
    return None if ask is None else ask.parsed.request.value


@pytest.mark.parametrize("safety", [True, False])
def test_a_request_rewritten_in_place_while_awaiting_a_decision_is_found(
    tmp_path: Path, safety: bool
) -> None:
    async def run() -> None:
        root, state = tmp_path / "root", tmp_path / "state"
        state.mkdir()
        person = Person()
        core = ServingCore(root, state, person)
        served = core.add_session(S)
        paths = [write_request(root, S, f"r{i:04d}", value="ls") for i in range(WAITING)]
        await core.drain.rescan(served)
        assert person.count() == WAITING
        # The last file of the listing: a share looked at from the start does not reach it at once.
        key = AskKey(S, paths[-1].name)
        rewrite_in_place(paths[-1], "rm -rf ~")
        passes = 0
        while shown_value(person, key) != "rm -rf ~":
            passes += 1
            assert passes <= SPREAD_PASSES, "a rewritten request was not found within one round"
            await core.drain.rescan(served, safety)
        assert passes == (3 if safety else 1)  # a share of 256 a pass; a file event's rescan: all
        assert person.count() == WAITING
        core.stop()
        await core.run()  # releases the session

    asyncio.run(run())
