"""A deny stays a deny while the at-once lane judges a burst on the disk thread (issue 37, campaign3).

A session grant revoked, or a config narrowed and reloaded, on the event loop while the publisher's
disk thread judges a burst: no judgment that began after the revocation (or the reload) returned
allows by what it took away, and every answer a child reads is the judgment made of its ask (once).
"After" is the strongest order that holds here: judging reads the grant book's rules and the store's
policy as values replaced whole (`core.judging.recorded`), so a judgment that begins after the change
sees it. A judgment that began before it may still be published after it (its intake's settle):
that window is one trip's settle, as for a batch judged on the loop and still committing.

The node's own `RecordedAuthority` judges; each judgment is noted by a thin recorder (`Noting`, the
`Judge` seam) with the step of one counter the test also ticks around the change.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from core.history import HistoryStore
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.seams import Seams
from core.serving.intake import INTAKE_FILES, SETTLE_FILES
from core.serving.loop import ServingCore
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter, Judgment
from core.wire.request import ParsedRequest, SessionGrant
from tests.helpers import needs_inotify, request_body, response_path, session_dir, wait_for
from tests.history.support import S
from tests.rules.support import HOME, Layout

BURST = INTAKE_FILES + 2 * SETTLE_FILES  # the first trip's, and two later trips' (`Drain`)
LATER = 40
GRANT = SessionGrant(surface="bash", pattern="deploy *")


class Noted(NamedTuple):
    began: int
    request_id: str
    verdict: str
    thread: str


class Noting:
    """The node's authority, each judgment noted with the step at which it began."""

    def __init__(self, authority: RecordedAuthority) -> None:
        self.authority = authority
        self.lock = threading.Lock()
        self.steps = 0
        self.noted: list[Noted] = []

    def tick(self) -> int:
        with self.lock:
            self.steps += 1
            return self.steps

    def judge(self, parsed: ParsedRequest, session_id: str) -> Judgment:
        began = self.tick()
        judgment = self.authority.judge(parsed, session_id)
        with self.lock:
            thread = threading.current_thread().name
            self.noted.append(Noted(began, parsed.request.id, judgment.verdict, thread))
        return judgment


def ask_bytes(request_id: str, command: str) -> bytes:
    intent = {"surface": "bash", "matchValues": [command], "boundaryValue": None, "requesterCwd": "/repo",
              "principal": {"sessionId": "child", "agentName": "Explore"}}
    return json.dumps(request_body(request_id, S, accessIntent=intent)).encode()


def rename_in(root: Path, asks: dict[str, bytes]) -> None:
    """Write each ask aside, then rename them all into the inbox together (a burst)."""
    requests = session_dir(root, S) / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    (requests.parent / "responses").mkdir(exist_ok=True)
    for request_id, data in asks.items():
        (requests / f".{request_id}.tmp").write_bytes(data)
    for request_id in asks:
        os.rename(requests / f".{request_id}.tmp", requests / f"{request_id}.json")


def answered(root: Path, ids: list[str]) -> dict[str, bool]:
    """Each answered ask's response: approved or not."""
    seen: dict[str, bool] = {}
    for request_id in ids:
        path = response_path(root, S, request_id)
        if path.exists():
            seen[request_id] = json.loads(path.read_bytes())["approved"] is True
    return seen


async def burst_across(tmp_path: Path, config: dict[str, object],
                       change: Callable[[RecordedAuthority, Layout], None]) -> None:
    """A burst the authority allows, `change` made on the loop once part of it is answered, asks
    written after it: checked as the module's docstring says."""
    layout = Layout(tmp_path)
    layout.write_global(config)
    authority = RecordedAuthority(PolicyStore(layout.agent_dir, layout.project, None, home=HOME,
                                              accept_widening=True), ManualClock())
    authority.record(S, [GRANT], "Explore")
    noting = Noting(authority)
    clock = ManualClock(1_800_000_000.0)
    root, history = tmp_path / "root", HistoryStore.in_state_dir(tmp_path / "state")
    core = ServingCore(root, tmp_path / "state", DenyingArbiter(clock), judge=noting, ledger=history,
                       seams=Seams(clock=clock))
    core.subscribe(history.observe)
    core.add_session(S)
    serving = asyncio.create_task(core.run())
    try:
        burst = {f"b{n:04d}": ask_bytes(f"b{n:04d}", f"deploy b{n}") for n in range(BURST)}
        rename_in(root, burst)
        some = 1  # the first intake is settling: the later trips are being read and judged
        await wait_for(lambda: len(answered(root, list(burst))) >= some, what="the burst answered")
        before = noting.tick()
        change(authority, layout)  # on the loop, while the disk thread judges the burst
        after = noting.tick()
        later = {f"l{n:04d}": ask_bytes(f"l{n:04d}", f"deploy l{n}") for n in range(LATER)}
        rename_in(root, later)
        ids = [*burst, *later]
        await wait_for(lambda: len(answered(root, ids)) == len(ids), what="every ask answered")
        await wait_for(lambda: sum(1 for r in history.query() if r.written) == len(ids), what="rows noted")
    finally:
        core.stop()
        await asyncio.wait_for(serving, 30)
    read = answered(root, ids)
    judged: dict[str, list[Noted]] = {}
    for noted in noting.noted:
        judged.setdefault(noted.request_id, []).append(noted)
    assert {rid: len(n) for rid, n in judged.items() if len(n) != 1} == {}, "an ask judged twice"
    assert set(judged) == set(ids)
    assert any(n.thread.startswith("pi-authorizer-disk") for n in noting.noted), "the lane judged"
    allowed_after = [n for n in noting.noted if n.began > after and n.verdict == "allow"]
    assert allowed_after == [], f"{len(allowed_after)} judgments begun after the change allowed"
    assert [rid for rid in later if read[rid]] == []
    disagree = [rid for rid in ids if read[rid] != (judged[rid][0].verdict == "allow")]
    assert disagree == [], "a child read another answer than its ask's judgment"
    assert any(n.verdict == "allow" for n in noting.noted if n.began < before), "allowed before the change"
    assert any(n.request_id in burst for n in noting.noted if n.began > after), "the burst judged across it"
    rows = {r.request_id: r for r in history.query()}
    assert [rid for rid in ids if (rows[rid].verdict == "approved") != read[rid]] == []
    history.close()


@needs_inotify
@pytest.mark.timeout(120)
async def test_no_judgment_after_a_session_grant_is_revoked_allows_by_it(tmp_path: Path) -> None:
    def revoke(authority: RecordedAuthority, _: Layout) -> None:
        (grant,) = authority.list_grants()
        assert authority.revoke_grant(S, grant.grant_id)

    await burst_across(tmp_path, {"permission": {"bash": {"*": "ask"}}}, revoke)


@needs_inotify
@pytest.mark.timeout(120)
async def test_no_judgment_after_a_narrowing_reload_allows_by_the_rule_it_removed(tmp_path: Path) -> None:
    def narrow(authority: RecordedAuthority, layout: Layout) -> None:
        (grant,) = authority.list_grants()
        assert authority.revoke_grant(S, grant.grant_id)  # the rule alone allows from now on ...
        fresh = layout.global_config.with_suffix(".new")  # ... until the reload takes it away
        fresh.write_text(json.dumps({"permission": {"bash": {"*": "ask", "deploy *": "deny"}}}))
        os.replace(fresh, layout.global_config)
        authority.reload()

    await burst_across(tmp_path, {"permission": {"bash": {"*": "ask", "deploy *": "allow"}}}, narrow)
