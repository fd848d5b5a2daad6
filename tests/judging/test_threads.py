"""Judging from two threads at once (the publisher's disk thread and the event loop) while the loop
reloads the config and records a grant: every judgment is one judging alone would make.

Real threads started together at a barrier, the interpreter switching between them every
microsecond, one `RecordedAuthority` shared: each judgment equals the judgment of the same ask made
alone under the config and grants before the change, or after it (a judgment made while a change
lands sees one state or the other), and every judgment made after the last change equals judging
alone in the final state. Grant uses are counted without a lost update.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.forwarding.inbox import SessionInbox
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.at_once import AtOnce
from core.serving.intake import FileRead, Intake
from core.serving.judgment import judge_ask, verdict_decision
from core.testing import ManualClock
from core.vocabulary.asks import Decision, DenyingArbiter, Judgment
from core.wire.decisions import SessionApprovalDecision
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest, SessionGrant
from core.wire.response import ForwardedResponse
from tests.rules.support import HOME, Layout

BEFORE = {"permission": {"bash": {"*": "ask", "git *": "allow", "rm *": {"action": "deny", "reason": "no"}},
                         "path": {"*": "ask", "/tmp/*": "allow"}}}
#: Narrower: `git push` denied, `/tmp` asked; and a config error to log (a value that is no action).
AFTER = {"permission": {"bash": {"*": "ask", "git *": "allow", "git push *": "deny", "rm *": "deny",
                                 "x": "maybe"}, "path": {"*": "ask"}}}
GRANT = SessionGrant(surface="bash", pattern="make *")
SESSIONS = ("s1", "s2")
COMMANDS = ("git status", "git push -f", "make all", "rm -rf /", "ls", "\U0001f600 make", "")


def _body(i: int) -> dict[str, Any]:
    surface = "path" if i % 5 == 4 else "bash"
    value = f"/tmp/{i}" if surface == "path" else f"{COMMANDS[i % len(COMMANDS)]} {i % 40}".strip()
    body: dict[str, Any] = {"id": f"r{i}", "createdAt": 1, "requesterSessionId": "child",
                            "targetSessionId": "s", "requesterAgentName": "Explore", "message": "m"}
    if i % 11 == 10:
        return body  # no facts: asked
    body["accessIntent"] = {"surface": surface, "matchValues": [value], "boundaryValue": None,
                            "requesterCwd": "/w", "principal": {"sessionId": "child", "agentName": "Explore"}}
    return body


#: Asks of the burst: many different, some repeated (kept from their second judgment on).
BODIES = [_body(i) for i in range(160)]


class Node:
    """Config files, and an authority over them."""

    def __init__(self, tmp: Path) -> None:
        self.layout = Layout(tmp)
        self.layout.write_global(BEFORE)
        self.clock = ManualClock(1_000.0)

    def authority(self) -> RecordedAuthority:
        store = PolicyStore(self.layout.agent_dir, self.layout.project, None, home=HOME, accept_widening=True)
        return RecordedAuthority(store, self.clock)

    def reload(self, authority: RecordedAuthority) -> None:
        fresh = self.layout.global_config.with_suffix(".new")
        fresh.write_text(json.dumps(AFTER))
        os.replace(fresh, self.layout.global_config)
        authority.reload()


def _seen(judgment: Judgment) -> tuple[object, ...]:
    return (judgment.verdict, judgment.decided_by, judgment.reason, tuple(judgment.explanation),
            judgment.config_errors)


def _alone(node: Node, asks: list[ParsedRequest], grant: bool) -> list[dict[str, tuple[object, ...]]]:
    """Per ask, per session: the judgment made alone, in one thread, under the files as they are."""
    authority = node.authority()
    if grant:
        authority.record("s1", [GRANT], "Explore")
    return [{s: _seen(authority.judge_afresh(ask, s, preview=True)) for s in SESSIONS} for ask in asks]


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
def test_two_threads_judge_as_one_would_during_a_reload_and_a_grant(tmp_path: Path) -> None:
    asks = [parse_request(json.dumps(body).encode()) for body in BODIES]
    node = Node(tmp_path)
    states = [_alone(node, asks, grant=False)]
    authority = node.authority()
    start = threading.Barrier(3)
    halfway = threading.Event()
    changed = threading.Event()
    made: list[list[tuple[int, str, bool, Judgment]]] = [[], []]
    failed: list[BaseException] = []

    def judge(worker: int) -> None:
        try:
            start.wait(10)
            passes, after = 0, False
            while passes < 4 or not after:  # ends with a whole pass in the final state
                after = changed.is_set()  # set before this pass began: the final state throughout
                for n, ask in enumerate(asks):
                    session = SESSIONS[(n + worker) % 2]
                    judgment, _ = judge_ask(authority, ask, session, node.clock)
                    made[worker].append((n, session, after, judgment))
                passes += 1
                if passes == 2:
                    halfway.set()
        except BaseException as error:  # reported by the test's own thread
            failed.append(error)
            halfway.set()

    workers = [threading.Thread(target=judge, args=(w,)) for w in range(2)]
    for worker in workers:
        worker.start()
    start.wait(10)
    assert halfway.wait(60)
    node.reload(authority)  # on "the loop", while both judge
    authority.record("s1", [GRANT], "Explore")
    changed.set()
    for worker in workers:
        worker.join(120)
    assert not failed, failed
    assert all(not worker.is_alive() for worker in workers)
    states += [_alone(node, asks, grant=False), _alone(node, asks, grant=True)]  # the files reloaded

    final = 0
    for judged in made:
        for n, session, after, judgment in judged:
            seen = _seen(judgment)
            if after:
                final += 1
                assert seen == states[2][n][session], (BODIES[n], session)
            else:
                assert seen in [state[n][session] for state in states], (BODIES[n], session)
    assert final >= len(asks)
    # Every use of the grant counted once, whichever thread judged it.
    uses = sum(1 for worker in made for *_, judgment in worker
               if isinstance(judgment.decided_by, SessionApprovalDecision))
    assert uses > 0
    assert [g.decided for g in authority.list_grants()] == [uses]


@pytest.mark.usefixtures("switching")
def test_the_lanes_one_call_judgment_beside_the_loop_during_a_reload_and_a_grant(tmp_path: Path) -> None:
    """The at-once lane (`AtOnce.serve`, its usual ask judged in one call: `decided_plain`) on one
    thread, `judge_ask` on the other, while the config is reloaded and a grant recorded: each answer the
    lane gives is the one of a state the node was in, every answer after the change the final state's,
    and the grant's uses are counted once each."""
    asks = [parse_request(json.dumps(body).encode()) for body in BODIES]
    node = Node(tmp_path)
    states = [_alone(node, asks, grant=False)]
    authority = node.authority()
    arbiter = DenyingArbiter(node.clock)
    inbox = SessionInbox(tmp_path / "root", "s1")
    start = threading.Barrier(3)
    halfway = threading.Event()
    changed = threading.Event()
    lane: list[tuple[int, str, bool, ForwardedResponse]] = []
    loop: list[Judgment] = []
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            start.wait(10)
            passes, after = 0, False
            while passes < 4 or not after:
                after = changed.is_set()
                for session in SESSIONS:
                    reads = [(f"r{n}.json", FileRead(raw=ask.raw, parsed=_for(ask, session),
                                                     identity=(1, 2, 3))) for n, ask in enumerate(asks)]
                    served = AtOnce(session, authority, node.clock, 60_000, arbiter.decide_at_once).serve(
                        inbox, Intake(reads, frozenset(), {}))
                    assert not served.judged
                    lane.extend((int(r.key.name[1:-5]), session, after, r.response) for r in served.at_once)
                passes += 1
                if passes == 2:
                    halfway.set()
        except BaseException as error:
            failed.append(error)
            halfway.set()

    def judge() -> None:
        try:
            start.wait(10)
            while not changed.is_set() or len(loop) < 4 * len(asks):
                for n, ask in enumerate(asks):
                    loop.append(judge_ask(authority, ask, SESSIONS[n % 2], node.clock)[0])
        except BaseException as error:
            failed.append(error)

    workers = [threading.Thread(target=serve), threading.Thread(target=judge)]
    for worker in workers:
        worker.start()
    start.wait(10)
    assert halfway.wait(60)
    node.reload(authority)
    authority.record("s1", [GRANT], "Explore")
    changed.set()
    for worker in workers:
        worker.join(120)
    assert not failed, failed
    states += [_alone(node, asks, grant=False), _alone(node, asks, grant=True)]

    def answer(seen: tuple[object, ...], session: str) -> ForwardedResponse:
        if seen[0] == "ask":
            taken = arbiter.decide_unasked(session)
            assert isinstance(taken, Decision)
            return taken.response
        return verdict_decision(str(seen[0]), seen[1], seen[2], session, node.clock).response  # type: ignore[arg-type]

    for n, session, after, response in lane:
        if after:
            assert response == answer(states[2][n][session], session), (BODIES[n], session)
        else:
            assert response in [answer(state[n][session], session) for state in states], (BODIES[n], session)
    uses = sum(1 for *_, response in lane if isinstance(response.decided_by, SessionApprovalDecision))
    uses += sum(1 for judgment in loop if isinstance(judgment.decided_by, SessionApprovalDecision))
    assert uses > 0
    assert [g.decided for g in authority.list_grants()] == [uses]


def _for(ask: ParsedRequest, session: str) -> ParsedRequest:
    """`ask` addressed to `session` (its id `r<n>` kept)."""
    request = ask.request.model_copy(update={"target_session_id": session})
    return ParsedRequest(request, ask.raw, ask.dropped)
