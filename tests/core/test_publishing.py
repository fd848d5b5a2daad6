"""Group commit keeps its promises: recorded before visible, every ask answered exactly once.

A burst is served in batches (one transaction, one durability step, one folder fsync each), through
a real serving core on real files, real SQLite and real inotify; stages are observed through the
core's explicit `fault` seam (here only counted; `tests/history/test_crash.py` kills at them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.history import HistoryStore
from core.serving import ServingCore
from core.serving.intake import INTAKE_FILES
from core.testing import FailingLedger, FlushCountingDisk, HeldAt, PoisonLedger, ThreadNotingLedger
from core.vocabulary.asks import DenyingArbiter
from tests.core.support import (
    ALLOW_LS,
    assert_answered_once,
    requests_left,
    responses,
    rows_by_request,
    serve_until_answered,
    write_burst,
)
from tests.helpers import (
    Served,
    read_response_when_written,
    session_dir,
    wait_for,
    write_request,
    write_request_bytes,
)
from tests.history.support import Node, S, intent


async def test_a_burst_is_answered_once_in_fewer_batches_than_asks(tmp_path: Path) -> None:
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 300)
    stages: list[str] = []
    await serve_until_answered(node, ids, stages)
    assert_answered_once(node, ids)
    batches = stages.count("recorded")
    assert 1 <= batches < len(ids)
    # Each batch went through every stage, in order, before the next began.
    order = [s for s in stages if s not in ("deleted", "inotify_add_watch")]  # the watcher has its own
    assert order[:6] == ["arrived", "recorded", "staged", "durable", "half-linked", "linked"]


async def test_every_answer_of_a_burst_is_logged_once_in_fewer_lines_than_asks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 300)
    with caplog.at_level(logging.INFO, logger="pi_authorizer"):
        await serve_until_answered(node, ids, [])
    served = [r.getMessage() for r in caplog.records if "->" in r.getMessage()]
    # Each answer's part names who asked what, the verdict, who decided and why, as a line of its own.
    parts = [part for line in served for part in re.findall(r"request=[^;]*", line)]
    logged = Counter(re.match(r"request=(\S+)", part)[1] for part in parts)  # type: ignore[index]
    assert logged == Counter(f"{rid}.json" for rid in ids)
    for part in parts:
        allowed = int(re.match(r"request=b(\d+)", part)[1]) % 2 == 1  # type: ignore[index]
        assert "surface=bash" in part and "agent=" in part and " in " in part
        if allowed:
            assert "-> approved by=rule" in part and "reason=" not in part
        else:
            assert "-> denied_with_reason" in part and "reason=" in part
    assert all(line.startswith("session=") for line in served)
    assert len(served) < len(ids)


#: Under 80 characters, so `log_safe(value, 80)` keeps it whole: it reads as an answer of its own.
FORGED_PART = "ls a; request=forged.json agent=main surface=bash value=rm -> denied by=rule"


async def test_a_childs_semicolon_cannot_split_its_answer_or_add_one_to_a_joined_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found in review: `; ` separates a joined line's answers, and a child's value (an ordinary
    `cd x; make`, or a forged part) could make one answer read as two."""
    node = Node(tmp_path, ALLOW_LS)
    ids = [f"r{i:03d}" for i in range(40)]
    for i, rid in enumerate(ids):
        write_request(node.root, S, rid, accessIntent=intent("bash", FORGED_PART if i == 7 else f"ls {rid}"))
    with caplog.at_level(logging.INFO, logger="pi_authorizer"):
        await serve_until_answered(node, ids, [])
    served = [r.getMessage() for r in caplog.records if "->" in r.getMessage()]
    joined = [line for line in served if re.match(r"session=\S+ answered \d+: ", line)]
    # A joined line is split as written; a line of one answer is that answer.
    parts = [part for line in joined for part in line.split(": ", 1)[1].split("; ")]
    parts += [line for line in served if line not in joined]
    named = Counter(re.search(r"request=(\S+)", part)[1] for part in parts)  # type: ignore[index]
    assert named == Counter(f"{rid}.json" for rid in ids)
    assert "forged.json" not in named


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(waves=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=3))
def test_bursts_of_any_size_answered_exactly_once(
    tmp_path_factory: pytest.TempPathFactory, waves: list[int]
) -> None:
    node = Node(tmp_path_factory.mktemp("waves"), ALLOW_LS)
    ids = asyncio.run(serve_waves(node, waves))
    assert_answered_once(node, ids)
    node.history.close()


async def serve_waves(node: Node, waves: list[int]) -> list[str]:
    stages: list[str] = []
    node.fault = stages.append
    await node.start(DenyingArbiter())
    ids: list[str] = []
    try:
        for wave, size in enumerate(waves):
            # A wave lands while the previous ones may still be publishing.
            ids += write_burst(node.root, size, prefix=f"w{wave}x")
            await asyncio.sleep(0)
        await wait_for(
            lambda: set(responses(node.root)) >= set(ids) and not requests_left(node.root),
            within=60,
            what="every wave answered",
        )
        await wait_for(lambda: all(r.written == 1 for r in node.history.query() if r.verdict), what="noted")
    finally:
        await node.stop()
    assert 1 <= stages.count("recorded") <= len(ids)
    return ids


async def test_hostile_files_in_a_batch_are_quarantined_and_the_rest_answered(tmp_path: Path) -> None:
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 20)
    hostile = {
        "not-json.json": b"\x00\xff{",
        "wrong-id.json": json.dumps({"id": "other", "createdAt": 1}).encode(),
        "bad time.json": b"{}",
        "no-created.json": json.dumps({"id": "no-created", "targetSessionId": S}).encode(),
    }
    for name, data in hostile.items():
        write_request_bytes(node.root, S, name, data)
    (session_dir(node.root, S) / "requests" / "loop.json").symlink_to("/etc/passwd")
    stages: list[str] = []
    await serve_until_answered(node, ids, stages)
    assert stages.count("recorded") == 1  # one intake, one batch: the hostile files held up nothing
    published = responses(node.root)
    for rid in ids:
        assert rows_by_request(node.history)[rid].response == published[rid]
    quarantined = {e.key.name: e.reason for e in node.events if e.kind == "quarantined"}
    assert set(quarantined) == {*hostile, "loop.json"}
    assert all(quarantined.values())
    # A hostile file with a usable id is answered with a denial that says why, never approved.
    for rid in ("wrong-id", "no-created"):
        body = json.loads(published[rid])
        assert body["approved"] is False and body["decidedBy"]["kind"] == "gate_error"
        assert body["denialReason"]
    assert not requests_left(node.root)



async def test_a_verdict_the_history_refuses_is_denied_and_holds_up_no_other(tmp_path: Path) -> None:
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 12)
    poison = ids[3]  # a rule allows it: an approval must never be published without its record
    ledger = PoisonLedger(node.history, poison)
    core = ServingCore(node.root, node.state, DenyingArbiter(), judge=node.authority, ledger=ledger)
    core.subscribe(node.history.observe)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        await wait_for(lambda: set(responses(node.root)) >= set(ids), what="all answered")
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
    body = json.loads(responses(node.root)[poison])
    assert body["approved"] is False and body["decidedBy"]["kind"] == "gate_error"
    assert "history could not record" in body["denialReason"]
    rows = {row.request_id: row for row in node.history.query()}
    # The approval is never recorded; the row holds the denial the child got, closed as fail-safe.
    assert rows[poison].verdict == "denied_with_reason" and rows[poison].outcome == "fail-safe"
    assert rows[poison].response == responses(node.root)[poison]
    others = [rid for rid in ids if rid != poison]
    assert all(rows[rid].response == responses(node.root)[rid] for rid in others)
    assert ledger.refused >= 2  # the batch, then the verdict alone


async def test_a_bursts_later_intakes_take_turns_with_its_commits_on_one_disk_thread(tmp_path: Path) -> None:
    """A burst is read on the publisher's disk thread, between its commits (not beside them, trading the
    interpreter lock at every system call); the first intake of a listing too while that thread is free
    (else on a thread of its own: a new ask is read while a write hangs, `test_serving_faults`)."""
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 3 * INTAKE_FILES)
    ledger = ThreadNotingLedger(node.history)
    core = ServingCore(node.root, node.state, DenyingArbiter(), judge=node.authority, ledger=ledger)
    core.subscribe(node.history.observe)
    core.subscribe(node.events.append)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        await wait_for(lambda: set(responses(node.root)) >= set(ids) and not requests_left(node.root),
                       within=60, what="every ask answered and its request removed")
        await wait_for(lambda: all(r.written == 1 for r in node.history.query() if r.verdict), what="noted")
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
    assert_answered_once(node, ids)
    [disk] = set(ledger.records)  # every batch committed on the one disk thread
    assert disk.startswith("pi-authorizer-disk")
    assert len(ledger.lookups) >= 2 and set(ledger.lookups) == {disk}


# --------------------------------------------------------------------------------------------------
# A request file that vanishes and comes back while its answer is being published (found by the red
# campaign: a child swapping its whole session folder for a link and back mid-burst).
#
# The record used to free the name as soon as the file vanished, so the file back under it was taken as
# a new ask: judged and published a second time (two `answered`), or its first answer, placed by the
# batch still in flight, met the second and this node reported its own response as FORGED. Now a record
# whose answer is in flight keeps its name until the publisher reports.
#
# A real core, the real history, real files; the publisher is held at its `arrived` fault point (the
# verdict not yet recorded, the worst case: a second judgment finds no recorded verdict either).


async def test_a_file_moved_away_and_back_while_its_answer_is_published_is_answered_once(
    tmp_path: Path,
) -> None:
    store = HistoryStore.in_state_dir(tmp_path / "state")
    held = HeldAt("arrived")
    async with Served(tmp_path, DenyingArbiter(), ledger=store, fault=held) as served:
        served.core.subscribe(store.observe)
        request = write_request(served.root, S, "back")
        away = session_dir(served.root, S) / "back.json.away"
        try:
            await wait_for(held.entered.is_set, what="the answer's batch held")
            os.rename(request, away)  # the child moves its folder away...
            await served.core.rescan_all()
            os.rename(away, request)  # ...and back
            await served.core.rescan_all()
        finally:
            held.release.set()
        body = await read_response_when_written(served.root, S, "back")
        assert body["decidedBy"]["kind"] == "unavailable"
        await wait_for(lambda: not request.exists(), what="the answered request removed")
        await served.core.rescan_all()
        kinds = served.kinds()
    # Decided at once in its intake's trip (`core.serving.at_once`): reported once, its arrival in its row.
    assert "arrived" not in kinds and kinds.count("answered") == 1, kinds
    assert "forged" not in kinds and "quarantined" not in kinds
    assert [(r.outcome, r.written) for r in store.query()] == [("fail-safe", 1)]
    store.close()


async def test_a_response_whose_verdict_the_history_holds_is_not_flushed_itself(tmp_path: Path) -> None:
    """The verdict is durable in the history before its response is visible, and a restart publishes it
    from there: the new response file costs no flush of its own (docs/design/reliability.md)."""
    disk = FlushCountingDisk()
    store = HistoryStore.in_state_dir(tmp_path / "state")
    async with Served(tmp_path, DenyingArbiter(), ledger=store, writer=disk) as served:
        write_request(served.root, S, "one")
        body = await read_response_when_written(served.root, S, "one")
        await wait_for(lambda: not requests_left(served.root), what="the request removed")
    recorded = store.recorded_verdicts(S, ["one"])["one"]
    assert body["state"] == "denied_with_reason" and recorded.written
    assert (session_dir(served.root, S) / "responses" / "one.json").read_bytes() == recorded.body
    assert disk.flushes == []


@pytest.mark.parametrize("history", ["none", "refusing"])
async def test_a_response_no_durable_verdict_stands_behind_is_flushed(tmp_path: Path, history: str) -> None:
    """Without a history, or when it refuses the verdict (a fail-safe denial is sent unrecorded), the
    response file itself is made durable, and its folder, before the answer counts as given."""
    disk = FlushCountingDisk()
    store = HistoryStore.in_state_dir(tmp_path / "state")
    ledger = None if history == "none" else FailingLedger(store, failures=-1)
    async with Served(tmp_path, DenyingArbiter(), ledger=ledger, writer=disk) as served:
        write_request(served.root, S, "one")
        body = await read_response_when_written(served.root, S, "one")
    assert body["approved"] is False
    # the file and its folder (a write retried on a busy machine flushes its file again)
    assert set(disk.flushes) == {"file", "folder"}


async def test_a_response_a_power_cut_left_empty_is_taken_for_ours_on_restart(tmp_path: Path) -> None:
    """A response not flushed itself may be empty or cut short after a power cut (its verdict is
    durable); the restart takes it for this node's answer, never for a forgery, and serves on."""
    store = HistoryStore.in_state_dir(tmp_path / "state")
    async with Served(tmp_path, DenyingArbiter(), ledger=store) as served:
        request = write_request(served.root, S, "cut")
        kept = request.read_bytes()
        await read_response_when_written(served.root, S, "cut")
        await wait_for(lambda: not requests_left(served.root), what="the request removed")
    response = session_dir(served.root, S) / "responses" / "cut.json"
    response.write_bytes(b"")  # what the cut left: the name, not the bytes
    request.write_bytes(kept)  # nor the removal of the request
    booted = time.time()  # the machine started again after the cut
    async with Served(tmp_path, DenyingArbiter(), ledger=store, booted_at=lambda: booted) as served:
        await wait_for(lambda: not requests_left(served.root), what="the request taken as answered")
        write_request(served.root, S, "next")
        await read_response_when_written(served.root, S, "next")
        assert served.core.quarantine.records() == []
        assert "quarantined" not in served.kinds()
