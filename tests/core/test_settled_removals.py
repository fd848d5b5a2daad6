"""Removing an answered request is no news to the watcher, yet a request reusing its name is served."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.serving import ServingCore
from core.serving.asks import DenyingArbiter
from tests.helpers import response_path, session_dir, wait_for, write_request

S = "019ff969-c34c-70be-9034-fae19c852932"


async def test_a_name_reused_after_its_answered_request_was_removed_is_served_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    core = ServingCore(root, tmp_path / "state", DenyingArbiter())
    core.add_session(S)
    task = asyncio.create_task(core.run())
    request = session_dir(root, S) / "requests" / "r1.json"
    try:
        write_request(root, S, "r1")
        answered = response_path(root, S, "r1")
        await wait_for(lambda: answered.exists() and not request.exists(), what="answered")
        await wait_for(lambda: "r1.json" not in core.served[S].records, what="the removal noted")
        response_path(root, S, "r1").unlink()  # the child read its answer
        write_request(root, S, "r1")
        await wait_for(lambda: response_path(root, S, "r1").exists(), what="the reused name answered")
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
