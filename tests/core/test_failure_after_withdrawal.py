"""A file whose serving fails after its child withdrew it: nothing is written for it (the child is
gone; a gate denial would be left behind under responses/), and serving goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.serving import ServeEvent, ServingCore
from core.serving.asks import DenyingArbiter, Judgment
from core.wire.request import ParsedRequest
from tests.helpers import read_response_when_written, response_path, session_dir, wait_for, write_request
from tests.history.support import S


class WithdrawnThenFailing:
    """A judge during whose work the child withdraws the `doomed` request, then the judge fails."""

    def __init__(self, root: Path) -> None:
        self.requests = session_dir(root, S) / "requests"

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        if parsed.request.id == "doomed":
            (self.requests / "doomed.json").unlink()
            raise RuntimeError("the judge broke")
        return Judgment(verdict="ask")


async def test_serving_that_fails_after_the_child_withdrew_writes_no_response(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    events: list[ServeEvent] = []
    core = ServingCore(root, state, DenyingArbiter(), judge=WithdrawnThenFailing(root))
    core.subscribe(events.append)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        write_request(root, S, "doomed")
        await wait_for(lambda: any(e.kind == "quarantined" for e in events), what="the failure set aside")
        failed = next(e for e in events if e.kind == "quarantined")
        assert failed.reason is not None and "the judge broke" in failed.reason
        write_request(root, S, "next")  # serving goes on
        assert (await read_response_when_written(root, S, "next"))["approved"] is False
        assert not response_path(root, S, "doomed").exists()
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
