"""Regressions found by the red-team campaign (`scripts/red_campaign.py`), each reduced to the smallest
deterministic case on a real serving core (real files, real inotify, real SQLite history)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.history.store import HistoryStore
from core.person import DecisionRefused, Person
from core.serving import ServingCore
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from tests.helpers import response_path, session_dir, wait_for, write_request

S = "019ff969-c34c-70be-9034-fae19c852932"


def shown_value(person: Person, key: AskKey) -> str | None:
    ask = person.get(key)
    return None if ask is None else ask.parsed.request.value


@pytest.mark.parametrize("how", ["replaced", "rewritten", "withdrawn"])
def test_a_decision_is_never_applied_to_a_request_changed_while_the_person_decided(
    tmp_path: Path, how: str
) -> None:
    """The person approves `ls`; meanwhile the file under that name became `rm -rf ~` (renamed over it,
    or rewritten in place: the listing never sees the name go) or was withdrawn. Before: `approved` was
    written for the file holding `rm -rf ~` (or for the withdrawn one) and the request deleted unseen."""

    async def run() -> None:
        root, state = tmp_path / "root", tmp_path / "state"
        state.mkdir()
        person = Person()
        store = HistoryStore.in_state_dir(state)
        core = ServingCore(root, state, person, ledger=store)
        core.subscribe(store.observe)
        events: list[ServeEvent] = []
        core.subscribe(events.append)
        core.add_session(S)
        task = asyncio.create_task(core.run())
        key = AskKey(S, "r1.json")
        try:
            path = write_request(root, S, "r1", value="ls")
            await wait_for(lambda: shown_value(person, key) == "ls", what="the ask in front of the person")
            if how == "replaced":
                write_request(root, S, "r1", value="rm -rf ~")
            elif how == "rewritten":
                body = json.loads(path.read_bytes())
                body["value"] = "rm -rf ~"
                with path.open("r+b") as file:  # same inode, same name
                    file.write(json.dumps(body).encode())
                    file.truncate()
            else:
                path.unlink()
            with pytest.raises(DecisionRefused):
                await person.approve_once(key)
            assert not response_path(root, S, "r1").exists()
            if how != "withdrawn":
                # The new content is a new ask, in front of the person as it is.
                await wait_for(lambda: shown_value(person, key) == "rm -rf ~", what="the new ask shown")
                assert (session_dir(root, S) / "requests" / "r1.json").exists()
            assert [e.kind for e in events if e.kind != "arrived"][:1] == ["withdrawn"]
        finally:
            core.stop()
            await asyncio.wait_for(task, 30)

    asyncio.run(run())


def test_a_rule_denial_tells_the_agent_why(tmp_path: Path) -> None:
    from core.judging.recorded import RecordedAuthority
    from core.rules import PolicyStore
    from core.vocabulary.asks import DenyingArbiter
    from tests.helpers import read_response_when_written

    agent = tmp_path / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {"bash": {"*": "ask", "rm *": "deny"}}}))
    judge = RecordedAuthority(PolicyStore(agent, None, None, home="/home/me"))

    async def run() -> dict[str, object]:
        core = ServingCore(tmp_path / "root", tmp_path / "state", DenyingArbiter(), judge=judge)
        core.add_session(S)
        task = asyncio.create_task(core.run())
        try:
            intent = {
                "surface": "bash",
                "matchValues": ["rm -rf /tmp/x"],
                "boundaryValue": None,
                "requesterCwd": "/w",
                "principal": {"sessionId": "c", "agentName": "Explore"},
            }
            write_request(tmp_path / "root", S, "r1", value="rm -rf /tmp/x", accessIntent=intent)
            return await read_response_when_written(tmp_path / "root", S, "r1")
        finally:
            core.stop()
            await asyncio.wait_for(task, 30)

    response = asyncio.run(run())
    assert response["state"] == "denied_with_reason" and response["denialReason"], response
