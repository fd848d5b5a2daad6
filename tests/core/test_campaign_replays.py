"""Findings of the serve campaign (`bench/campaign_serve_kill.py`, issue 32), reduced to a real
`pi-authorizer serve` killed with SIGKILL, waiting for conditions, never for time.

A replay under an answered id is quarantined without an answer (as it must be). The file was moved
into the quarantine before the history held its row (the row followed through the history's queue),
so a run killed in between left the replay in the quarantine folder (itself bounded to its newest
1,000 entries) and nowhere in the history (campaign seed 3: 106 of 2,000 replays). Now the row
commits before the file moves: a history that cannot take it keeps the file in place.

An answer whose child stopped waiting while it waited at the disk (a restart's backlog, a slow disk)
was still linked, and the history said it was written, though no child would ever read it. Now the
publisher looks for the request just before placing the answer.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.history import HistoryStore
from core.seams import Seams
from core.serving.pipeline import DISK_WAIT_S
from core.testing import Breakable, GatedDisk, ManualClock
from core.vocabulary.asks import DenyingArbiter
from tests.helpers import (
    Served,
    bash_intent,
    poll_until,
    request_body,
    response_path,
    session_dir,
    wait_for,
    write_request_bytes,
)
from tests.history.support import S

REPO = Path(__file__).resolve().parents[2]
#: Logged by the first refused attempt to commit a set-aside file's row (`core.seams.retrying`).
REFUSED = "recording a request set aside in the history failed"
pytestmark = pytest.mark.timeout(180)  # a hang guard, not a speed check (the machine is shared)


def serve(tmp_path: Path) -> subprocess.Popen[bytes]:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"permission": {"bash": {"ls *": "allow"}}}))
    command = [sys.executable, "-m", "tui.cli", "serve", "--session", S, "--forwarding-root",
               str(tmp_path / "root"), "--create", "--state-dir", str(tmp_path / "state"),
               "--rules", str(rules), "--agent-dir", str(tmp_path), "--project", str(tmp_path)]
    with (tmp_path / "serve.log").open("ab") as log:
        return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def ask(request_id: str, created_ms: int) -> bytes:
    """The bytes a child writes for `ls <id>` (the same for the same id and time: a replay)."""
    body = request_body(request_id, S, createdAt=created_ms, accessIntent=bash_intent(f"ls {request_id}"))
    return json.dumps(body).encode()


def read_as_the_child(tmp_path: Path, request_id: str) -> bytes:
    """Waits for the answer, reads it, and removes response and request, as a pi child does."""
    answer = response_path(tmp_path / "root", S, request_id)
    poll_until(answer.exists, 120, f"{request_id} answered")
    data = answer.read_bytes()
    answer.unlink()
    (answer.parent.parent / "requests" / f"{request_id}.json").unlink(missing_ok=True)
    return data


def rows(tmp_path: Path) -> list[tuple[str, str, object]]:
    conn = sqlite3.connect(f"file:{tmp_path / 'state' / 'history.sqlite3'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT request_id, outcome, ended_at FROM asks ORDER BY id").fetchall()
    finally:
        conn.close()


@contextmanager
def history_held(tmp_path: Path) -> Iterator[None]:
    """The history's write lock held by another process (readers still read): nothing serve writes
    there commits until the block ends, as in the moment before a row's batch commits."""
    conn = sqlite3.connect(tmp_path / "state" / "history.sqlite3", isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def quarantined(tmp_path: Path, request_id: str) -> bool:
    held = tmp_path / "state" / "quarantine" / S
    return held.is_dir() and any(n.endswith(f"-{request_id}.json.reason.json") for n in os.listdir(held))


def test_a_replay_quarantined_by_a_run_killed_before_its_row_is_in_the_history_after_restart(
    tmp_path: Path,
) -> None:
    now_ms = time.time_ns() // 1_000_000
    first = serve(tmp_path)
    try:
        write_request_bytes(tmp_path / "root", S, "once.json", ask("once", now_ms))
        assert json.loads(read_as_the_child(tmp_path, "once"))["approved"] is True
        poll_until(lambda: [r[2] is not None for r in rows(tmp_path)] == [True], 60, "the row closed")
        with history_held(tmp_path):
            replay = session_dir(tmp_path / "root", S) / "requests" / "once.json"

            def refused() -> bool:
                # The answer's own removal of its request may still be due (it follows the row's
                # close) and take the replay with it, as it would a child's: the child replays again.
                if not replay.exists():
                    write_request_bytes(tmp_path / "root", S, "once.json", ask("once", now_ms))
                return REFUSED in (tmp_path / "serve.log").read_text(errors="replace")

            # Its row cannot commit: the replay is not moved (nor answered) until it does. Killed in
            # that wait, as the campaign's runs were between the move and the row.
            poll_until(refused, 90, "the history refusing the replay's row")
            assert not quarantined(tmp_path, "once")
            os.kill(first.pid, signal.SIGKILL)
            first.wait(30)
        assert not response_path(tmp_path / "root", S, "once").exists()  # not answered twice: sound
    finally:
        first.kill()
        first.wait(30)
    second = serve(tmp_path)
    try:
        write_request_bytes(tmp_path / "root", S, "control.json", ask("control", now_ms))
        read_as_the_child(tmp_path, "control")  # the restarted run serves
        poll_until(lambda: quarantined(tmp_path, "once"), 60, "the replay quarantined by the restarted run")
        poll_until(lambda: ("control", "rule") in [(r[0], r[1]) for r in rows(tmp_path) if r[2] is not None],
                   60, "the control row closed")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
    outcomes = [(r[0], r[1]) for r in rows(tmp_path)]
    assert ("once", "quarantined") in outcomes, outcomes  # the replay's trace in the person's history
    assert not response_path(tmp_path / "root", S, "once").exists()  # never answered twice


async def test_an_answer_whose_child_withdrew_while_it_waited_at_the_disk_is_not_recorded_written(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    history = HistoryStore.in_state_dir(tmp_path / "state")
    write_request_bytes(root, S, "late.json", ask("late", time.time_ns() // 1_000_000))
    disk = GatedDisk()
    try:
        async with Served(tmp_path, DenyingArbiter(), ledger=history, writer=disk) as served:
            served.core.subscribe(history.observe)
            await wait_for(disk.entered.is_set, what="the answer waiting at the disk")
            (session_dir(root, S) / "requests" / "late.json").unlink()  # its child stops waiting
            disk.gate.set()
            await wait_for(lambda: [r.ended_at is not None for r in history.query()] == [True],
                           what="the ask's row closed")
        [row] = history.query()
        # The child never read an answer: the history must not say one was written for it.
        assert row.written != 1, row
        assert row.outcome == "withdrawn", row  # its child gave up: nothing placed where nobody reads it
        assert not response_path(root, S, "late").exists()
    finally:
        history.close()


async def test_a_file_the_history_cannot_record_is_neither_answered_nor_set_aside_until_it_can(
    tmp_path: Path,
) -> None:
    """Finding 2's order in one process: while the history refuses every write, an unusable file
    stays where it is, unanswered (nothing visible without its row); once the history works again,
    the disk wait over, it is answered, set aside, and its row is there once."""
    fault, clock = Breakable(), ManualClock()
    history = HistoryStore.in_state_dir(tmp_path / "state", seams=Seams(clock=clock, fault=fault))
    root = tmp_path / "root"
    try:
        async with Served(tmp_path, DenyingArbiter(), ledger=history, clock=clock) as served:
            served.core.subscribe(history.observe)
            fault.broken = True
            write_request_bytes(root, S, "junk.json", b"{not json")
            await served.core.rescan_all()
            await wait_for(lambda: any(e.kind == "answer_failed" and e.key.name == "junk.json"
                                       for e in served.events), what="the file waiting for its row")
            assert (session_dir(root, S) / "requests" / "junk.json").exists()
            assert not response_path(root, S, "junk").exists()
            assert not quarantined_name(tmp_path, "junk.json")
            fault.broken = False
            clock.advance(DISK_WAIT_S[0])
            await served.core.rescan_all()
            await served.core.rescan_all()  # the first frees its name, the second serves it anew
            await wait_for(lambda: quarantined_name(tmp_path, "junk.json"), what="set aside")
        assert json.loads(response_path(root, S, "junk").read_bytes())["approved"] is False  # answered
        assert [(r.request_name, r.outcome) for r in history.query()] == [("junk.json", "quarantined")]
    finally:
        history.close()


async def test_a_batch_places_the_answers_whose_requests_are_there_and_withdraws_the_others(
    tmp_path: Path,
) -> None:
    """Finding 5 for a burst (one listing of the requests per batch): of twelve answers waiting at the
    disk, the six whose children gave up meanwhile are neither placed nor recorded written."""
    root = tmp_path / "root"
    history = HistoryStore.in_state_dir(tmp_path / "state")
    now_ms = time.time_ns() // 1_000_000
    ids = [f"a{i:02d}" for i in range(12)]
    for request_id in ids:
        write_request_bytes(root, S, f"{request_id}.json", ask(request_id, now_ms))
    disk = GatedDisk()
    try:
        async with Served(tmp_path, DenyingArbiter(), ledger=history, writer=disk) as served:
            served.core.subscribe(history.observe)
            await wait_for(disk.entered.is_set, what="the answers waiting at the disk")
            gone = ids[::2]
            for request_id in gone:
                (session_dir(root, S) / "requests" / f"{request_id}.json").unlink()
            disk.gate.set()
            await wait_for(lambda: len(history.query()) == 12
                           and all(r.ended_at is not None for r in history.query()), what="every row closed")
        by_id = {r.request_id: r for r in history.query()}
        for request_id in ids:
            withdrawn = request_id in gone
            assert response_path(root, S, request_id).exists() is not withdrawn, request_id
            assert (by_id[request_id].written == 1) is not withdrawn, by_id[request_id]
            assert (by_id[request_id].outcome == "withdrawn") is withdrawn, by_id[request_id]
    finally:
        history.close()


def quarantined_name(tmp_path: Path, name: str) -> bool:
    held = tmp_path / "state" / "quarantine" / S
    return held.is_dir() and any(n.endswith(f"-{name}.reason.json") for n in os.listdir(held))
