"""The at-once lane beside another server on the same inbox (issue 37, campaign3 findings 1 and 2).

Asks decided at once are judged in their intake's trip and settled on the publisher's disk thread
(`core.serving.at_once`); while they settle their names are held in `ServedSession.settling`, not in
the session's records. Another server's temp file for such an ask must make it `contested` (its rename
replaces whatever this node placed: the history never claims this node's answer was the one read), and
asks read after another server was seen are not answered by this node while it lasts (as the route
does, `Pipeline._answer_soon`): two servers never race one child.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

from core.history import HistoryStore
from core.serving.intake import INTAKE_FILES
from core.testing import HeldAt, ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import (
    Served,
    needs_inotify,
    request_body,
    response_path,
    session_dir,
    wait_for,
    write_request,
)
from tests.history.support import S

APPROVAL = json.dumps({"approved": True, "state": "approved"})


def other_temp(root: Path, request_id: str, pid: int) -> Path:
    """A temp file of the other server for its answer to `request_id` (the reference's naming)."""
    responses = response_path(root, S, request_id).parent
    temp = responses / f"{request_id}.json.{pid}.{time.time_ns()}.tmp"
    temp.write_text(APPROVAL)
    return temp


def noted(store: HistoryStore) -> bool:
    return any(r.request_id == "mine" and r.written is not None for r in store.query())


@needs_inotify
async def test_another_servers_answer_to_an_ask_being_settled_at_once_makes_it_contested(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    """The other server's temp file for an ask whose answer the disk thread is settling: once this node
    has placed its answer, the other's rename replaces it, so the row must not say it was delivered."""
    clock = ManualClock(1_800_000_000.0)
    held = HeldAt("staged")
    store = HistoryStore.in_state_dir(tmp_path / "state")
    try:
        async with Served(tmp_path, DenyingArbiter(clock), ledger=store, clock=clock, fault=held) as served:
            served.core.subscribe(store.observe)
            write_request(served.root, S, "mine")
            await asyncio.to_thread(held.entered.wait, 30)  # judged at once, its settle held at `staged`
            session = next(iter(served.core.served))
            assert "mine.json" in session.settling, "the ask is settled by the at-once lane"
            temp = other_temp(served.root, "mine", other.pid)  # the other server starts its answer
            await wait_for(lambda: "not_serving" in served.kinds(), what="the other server seen")
            held.release.set()
            await wait_for(response_path(served.root, S, "mine").exists, what="this node's answer placed")
            temp.rename(response_path(served.root, S, "mine"))  # ... and its rename replaces ours
            read = json.loads(response_path(served.root, S, "mine").read_bytes())
            assert read["approved"] is True  # what the child reads: the other server's answer
            await wait_for(lambda: not session.settling, what="the settle reported")
            await wait_for(lambda: noted(store) or "contested" in served.kinds(), what="the answer noted")
        rows = [r for r in store.query() if r.request_id == "mine"]
        delivered = [(r.outcome, r.written) for r in rows if r.written]
        assert delivered == [], "history: this denial was delivered; its child read an approval"
        assert [r.outcome for r in rows] == ["contested"]
    finally:
        store.close()


@needs_inotify
async def test_asks_read_after_another_server_was_seen_are_not_answered_at_once(
    tmp_path: Path, other: subprocess.Popen[bytes]
) -> None:
    """A burst longer than one intake: while the first intake's answers are settling, another server
    is seen. The next intakes' asks are read after that: this node leaves them to it (as the route
    does), it does not race it."""
    clock = ManualClock(1_800_000_000.0)
    held = HeldAt("staged")
    asks = INTAKE_FILES + 40
    requests = session_dir(tmp_path / "root", S) / "requests"
    requests.mkdir(parents=True)
    (requests.parent / "responses").mkdir()
    for n in range(asks):  # there before serving starts: its first pass takes them in
        (requests / f"ask{n:04d}.json").write_bytes(json.dumps(request_body(f"ask{n:04d}", S)).encode())
    async with Served(tmp_path, DenyingArbiter(clock), clock=clock, fault=held) as served:
        await asyncio.to_thread(held.entered.wait, 30)  # the first intake's settle, held at `staged`
        session = next(iter(served.core.served))
        first = set(session.settling)
        assert len(first) == INTAKE_FILES, "the first intake is settled by the at-once lane"
        other_temp(served.root, "theirs", other.pid)  # another server writes its answers here
        await wait_for(lambda: "not_serving" in served.kinds(), what="the other server seen")
        held.release.set()
        await wait_for(lambda: not session.settling or not first <= session.settling,
                       what="the first intake settled")
        async with session.scan_lock:  # the pass that read the burst is over
            pass
        await served.core.pipeline.publisher.on_disk(lambda: None)  # and what it asked of the disk
        await wait_for(lambda: not session.settling, what="every settle reported")
        answered = {p.stem for p in response_path(served.root, S, "x").parent.glob("ask*.json")}
    later = answered - {name.removesuffix(".json") for name in first}
    assert later == set(), f"{len(later)} asks read after the other server was seen were answered"
