"""An inbox that cannot be listed for a while withdraws none of the asks a person holds.

A session folder (or its `requests/`) moved away and back, or swapped for a link meanwhile, used to
list as empty: every undecided ask was reported withdrawn (dropped from the person's queue), then
served as a new ask when the folder came back, so a person could decide it twice, or lose the one
under the cursor. Only a listing of an existing folder that lacks a file withdraws its ask.

A real core, a real person's queue (`HumanAuthorizer`), real folders renamed in `tmp_path`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from core.person import DecisionRefused, HumanAuthorizer
from core.serving.asks import AskKey
from tests.helpers import Served, read_response_when_written, session_dir, wait_for, write_request
from tests.history.support import S


async def held_ask(served: Served, human: HumanAuthorizer, request_id: str) -> AskKey:
    """A request written and waiting in front of the person."""
    write_request(served.root, S, request_id)
    key = AskKey(S, f"{request_id}.json")
    await wait_for(lambda: human.awaiting(key), what=f"{request_id} in front of the person")
    return key


async def still_held_then_answered_once(served: Served, human: HumanAuthorizer, key: AskKey) -> None:
    """The ask stayed in the queue, arrived once; the person's decision answers it once."""
    assert "withdrawn" not in served.kinds() and human.awaiting(key)
    assert [e.key for e in served.events if e.kind == "arrived"] == [key]
    decided = await human.approve_once(key)
    assert decided.ask.key == key
    body = await read_response_when_written(served.root, S, key.name.removesuffix(".json"))
    assert body["state"] == "approved"
    await served.core.rescan_all()
    kinds = served.kinds()
    assert kinds.count("arrived") == 1 and kinds.count("answered") == 1, kinds
    assert "withdrawn" not in kinds and not human.pending()


async def test_requests_moved_away_and_back_withdraw_nothing_and_answer_once(tmp_path: Path) -> None:
    human = HumanAuthorizer()
    async with Served(tmp_path, human) as served:
        key = await held_ask(served, human, "kept")
        requests = session_dir(served.root, S) / "requests"
        away = session_dir(served.root, S) / "requests.away"
        os.rename(requests, away)
        await served.core.rescan_all()
        assert "withdrawn" not in served.kinds() and human.awaiting(key)
        os.rename(away, requests)
        await served.core.rescan_all()
        await still_held_then_answered_once(served, human, key)


async def test_session_folder_moved_away_linked_and_back_withdraws_nothing(tmp_path: Path) -> None:
    human = HumanAuthorizer()
    async with Served(tmp_path, human) as served:
        key = await held_ask(served, human, "kept")
        folder, away = session_dir(served.root, S), tmp_path / "away"
        os.rename(folder, away)
        await served.core.rescan_all()
        assert "withdrawn" not in served.kinds() and human.awaiting(key)
        folder.symlink_to(away, target_is_directory=True)  # refused (`UnsafeFolder`), never followed
        await served.core.rescan_all()
        assert "unsafe_folder" in served.kinds()
        assert "withdrawn" not in served.kinds() and human.awaiting(key)
        folder.unlink()
        os.rename(away, folder)
        await served.core.rescan_all()
        await still_held_then_answered_once(served, human, key)


async def test_a_decision_while_the_folder_is_away_or_refused_is_refused_and_the_ask_waits(
    tmp_path: Path,
) -> None:
    """The person decides the ask under the cursor while its file cannot be read: nothing is written,
    the person is told why, and the ask stays in its place to be decided once the folder is back."""
    human = HumanAuthorizer()
    async with Served(tmp_path, human) as served:
        key = await held_ask(served, human, "kept")
        folder, away = session_dir(served.root, S), tmp_path / "away"
        os.rename(folder, away)
        with pytest.raises(DecisionRefused, match="cannot be read"):
            await human.approve_once(key)
        assert human.awaiting(key)
        folder.symlink_to(away, target_is_directory=True)
        with pytest.raises(DecisionRefused, match="cannot be read"):
            await human.deny(key, "not through a link")
        assert human.awaiting(key)
        folder.unlink()
        os.rename(away, folder)
        await served.core.rescan_all()
        await still_held_then_answered_once(served, human, key)


async def test_a_file_gone_from_its_existing_folder_is_still_withdrawn(tmp_path: Path) -> None:
    human = HumanAuthorizer()
    async with Served(tmp_path, human) as served:
        gone = await held_ask(served, human, "gone")
        (session_dir(served.root, S) / "requests" / "gone.json").unlink()
        await served.core.rescan_all()
        assert [e.key for e in served.events if e.kind == "withdrawn"] == [gone]
        assert not human.awaiting(gone)
        # A `requests/` emptied and made anew under the same name is a listing of an existing folder.
        fresh = await held_ask(served, human, "fresh")
        requests = session_dir(served.root, S) / "requests"
        shutil.rmtree(requests)
        requests.mkdir()
        await served.core.rescan_all()
        assert [e.key for e in served.events if e.kind == "withdrawn"] == [gone, fresh]
        assert not human.pending()
