"""A session grant revoked while the at-once lane judges on another thread: once `revoke_grant` has
returned, no trip begun after it approves by that grant, however warm the lane's one-call judgment
(`RecordedAuthority.decided_plain`) and its cache of identical facts are. The loop's thread judges
other agents and sessions meanwhile (the last reading used moves under the lane's feet).

Real threads, the interpreter switching every microsecond, real config on disk, `ManualClock`.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.forwarding.inbox import SessionInbox
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.at_once import AtOnce
from core.serving.intake import FileRead, Intake
from core.serving.judgment import judge_ask
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest, SessionGrant
from tests.rules.support import HOME, Layout

CONFIG = {"permission": {"bash": {"*": "ask", "git *": "allow"}}}


def _raw(n: int, value: str, agent: str = "Explore", session: str = "s1") -> bytes:
    return json.dumps({
        "id": f"r{n}", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": session,
        "requesterAgentName": agent, "message": "m", "accessIntent": {
            "surface": "bash", "matchValues": [value], "boundaryValue": None, "requesterCwd": "/w",
            "principal": {"sessionId": "child", "agentName": agent}}}).encode()


@pytest.fixture
def switching() -> Iterator[None]:
    """The interpreter switches threads every microsecond: races show within a test's run."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.usefixtures("switching")
def test_no_trip_begun_after_a_revocation_approves_by_the_grant(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global(CONFIG)
    clock = ManualClock(1_000.0)
    authority = RecordedAuthority(PolicyStore(layout.agent_dir, layout.project, None, home=HOME), clock)
    authority.record("s1", [SessionGrant(surface="bash", pattern="make *")], "Explore")
    at_once = AtOnce("s1", authority, clock, 60_000, DenyingArbiter(clock).decide_at_once)
    inbox = SessionInbox(Path("/nonexistent"), "s1")
    elsewhere = [("make all", "Explore", "s2"), ("git log", "other", "s1"), ("make all", "other", "s1"),
                 ("ls", "Explore", "s1")]
    others: list[tuple[ParsedRequest, str]] = [
        (parse_request(_raw(900 + i, value, agent, session)), session)
        for i, (value, agent, session) in enumerate(elsewhere)]
    start = threading.Barrier(2)
    warm, revoked, done = threading.Event(), threading.Event(), threading.Event()
    trips: list[tuple[bool, dict[str, bool]]] = []
    failed: list[BaseException] = []

    def lane() -> None:
        try:
            start.wait(10)
            n = 0
            while not done.is_set() or len(trips) < 5:
                after = revoked.is_set()  # set before this trip began
                reads, values = [], {}
                for value in ("make all", "git status", "make all"):
                    n += 1
                    raw = _raw(n, value)
                    values[f"r{n}.json"] = value
                    read = FileRead(raw=raw, parsed=parse_request(raw), identity=(1, 2, 3))
                    reads.append((f"r{n}.json", read))
                served = at_once.serve(inbox, Intake(reads, frozenset(), {}))
                approved = {values[v.key.name] + v.key.name: v.response.approved for v in served.at_once}
                trips.append((after, approved))
                if len(trips) == 40:
                    warm.set()
                if after and len(trips) > 400:
                    done.set()
        except BaseException as error:
            failed.append(error)
            warm.set()
            done.set()

    worker = threading.Thread(target=lane)
    worker.start()
    start.wait(10)
    assert warm.wait(60)
    for parsed, session in others * 20:  # the loop judges others while the lane runs
        judge_ask(authority, parsed, session, clock)
    (entry,) = authority.list_grants()
    assert authority.revoke_grant(entry.session_id, entry.grant_id)
    revoked.set()
    for parsed, session in others * 20:
        judge_ask(authority, parsed, session, clock)
    assert done.wait(120)
    worker.join(60)
    assert not failed, failed
    assert any(a for after, approved in trips if not after for name, a in approved.items() if "make" in name)
    late = [(name, a) for after, approved in trips if after
            for name, a in approved.items() if name.startswith("make")]
    assert late and not any(a for _, a in late), [name for name, a in late if a][:5]
