"""A burst's batch placed together (`DiskWriter.stage_batch`/`place_batch`, written marks by row id:
issue 37's fifth pass) keeps its promises when someone else meddles between its stages (campaign4):
a response planted by another process after the batch was staged is never replaced and its row never
says this node's answer was written; a request withdrawn before the look is not answered and its row
not written; every other answer of the batch is written and its row (marked by a run of row ids that
the meddled ones break) says so, holding the bytes its child reads. The meddling happens at the
core's own `fault` checkpoints, on the disk thread, so it falls between the stages every time."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest

from core.disk.writer import DiskWriter
from core.seams import Seams
from core.serving import ServingCore
from core.vocabulary.asks import DenyingArbiter
from tests.core.support import ALLOW_LS, responses, write_burst
from tests.helpers import response_path, session_dir, wait_for
from tests.history.support import Node, S

FORGED = b'{"approved":true,"state":"approved","forged":true}'


class ThroughProc(DiskWriter):
    """Anonymous files linked through `/proc/self/fd/N` (a kernel refusing a link by the descriptor)."""

    by_descriptor = False


@pytest.mark.parametrize("writer", [DiskWriter(), ThroughProc()], ids=["by-descriptor", "through-proc"])
async def test_a_response_planted_after_staging_is_never_replaced_nor_noted_as_ours(
    tmp_path: Path, writer: DiskWriter,
) -> None:
    node = Node(tmp_path, ALLOW_LS)
    ids = write_burst(node.root, 60)
    planted = {rid for i, rid in enumerate(ids) if i % 3 == 0}
    withdrawn = {rid for i, rid in enumerate(ids) if i % 5 == 1} - planted
    requests = session_dir(node.root, S) / "requests"

    def meddle(point: str) -> None:
        if point == "staged":  # the batch's files exist, unnamed: a forger links its own first
            for rid in planted:
                try:
                    fd = os.open(response_path(node.root, S, rid), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                except FileExistsError:
                    continue
                with os.fdopen(fd, "wb") as out:
                    out.write(FORGED)
        elif point == "durable":  # just before the look for withdrawn requests
            for rid in withdrawn:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(requests / f"{rid}.json")

    core = ServingCore(node.root, node.state, DenyingArbiter(), judge=node.authority, ledger=node.history,
                       seams=Seams(fault=meddle, disk=writer))
    core.subscribe(node.history.observe)
    core.add_session(S)
    task = asyncio.create_task(core.run())
    try:
        answered = set(ids) - withdrawn
        await wait_for(lambda: set(responses(node.root)) >= answered, within=60, what="every answer placed")
        await wait_for(
            lambda: all(r.written is not None or r.ended_at is not None for r in node.history.query()
                        if r.request_id in ids),
            within=60, what="every row noted",
        )
    finally:
        core.stop()
        await asyncio.wait_for(task, 10)
    published = responses(node.root)
    rows: dict[str, list[tuple[bytes | None, int | None, str]]] = {}
    for row in node.history.query():
        rows.setdefault(row.request_id or "", []).append((row.response, row.written, row.outcome))
    for rid in ids:
        if rid in planted:
            assert published[rid] == FORGED, f"{rid}: the planted response was replaced"
            # The race was met where it is meant to be (one intake, one batch: the forger came after
            # the verdict was recorded and staged): a row holds this node's answer, not written.
            ours = [(body, written) for body, written, _ in rows[rid] if body not in (None, FORGED)]
            assert ours and all(written == 0 for _, written in ours), rows[rid]
            assert not any(written == 1 and body != FORGED for body, written, _ in rows.get(rid, [])), (
                f"{rid}: a row says this node's answer was written over a planted one: {rows.get(rid)}")
        elif rid in withdrawn:
            assert rid not in published, f"{rid}: answered after its request was withdrawn"
            assert not any(written == 1 for _, written, _ in rows.get(rid, [])), (
                f"{rid}: a row says written for a withdrawn ask: {rows.get(rid)}")
        else:
            assert [(body, written) for body, written, _ in rows[rid]] == [(published[rid], 1)], (
                f"{rid}: {rows[rid]} against {published[rid]!r}")
