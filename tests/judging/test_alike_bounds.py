"""The caches on the judging path hold what children send, so what they hold must stay bounded whatever
they send: the cache of identical facts (`RecordedAuthority._alike`, filled by `decided_plain`) promises
~`MAX_ALIKE` x `MAX_ALIKE_CHARS` characters. Asks served through the real at-once lane, with real config
on disk; the memory kept afterwards is measured with `tracemalloc` (no speed, no sleep).
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

from core.forwarding.inbox import SessionInbox
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.at_once import AtOnce
from core.serving.intake import FileRead, Intake
from core.testing import ManualClock
from core.vocabulary.asks import DenyingArbiter
from core.wire.reader import parse_request
from tests.rules.support import HOME

CONFIG = {"permission": {"bash": {"*": "ask", "rm *": {"action": "deny", "reason": "no"}}}}
#: Each hostile ask's `floor`: a string of its own, far longer than `MAX_ALIKE_CHARS` (a request file
#: may be 1 MiB; no limit counts the floor or the surface).
FLOOR_CHARS = 50_000
ASKS = 40


def _authority(root: Path) -> RecordedAuthority:
    config = root / "agent" / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(CONFIG))
    store = PolicyStore(root / "agent", root / "project", None, home=HOME)
    return RecordedAuthority(store, ManualClock(1_000.0))


def _read(n: int, floor: str | None, surface: str = "bash") -> tuple[str, FileRead]:
    principal = {"sessionId": "child", "agentName": "Explore"}
    intent: dict[str, object] = {"surface": surface, "matchValues": ["rm x"], "boundaryValue": None,
                                 "requesterCwd": "/w", "principal": principal}
    if floor is not None:
        intent["floor"] = floor
    raw = json.dumps({"id": f"r{n}", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                      "requesterAgentName": "Explore", "message": "m", "accessIntent": intent}).encode()
    return f"r{n}.json", FileRead(raw=raw, parsed=parse_request(raw), identity=(1, 2, 3))


def test_the_cache_of_identical_facts_keeps_no_long_floor(tmp_path: Path) -> None:
    authority = _authority(tmp_path)
    clock = authority.clock
    assert isinstance(clock, ManualClock)
    at_once = AtOnce("s", authority, clock, 60_000, DenyingArbiter(clock).decide_at_once)
    inbox = SessionInbox(Path("/nonexistent"), "s")
    for n in range(3):  # the policy composed, then judged under it: the one-call judgment applies
        served = at_once.serve(inbox, Intake([_read(n, None)], frozenset(), {}))
        assert [v.response.approved for v in served.at_once] == [False]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(ASKS):
            clock.advance(0.001)
            read = _read(100 + n, chr(ord("a") + n % 26) * FLOOR_CHARS + str(n))
            served = at_once.serve(inbox, Intake([read], frozenset(), {}))
            assert [v.response.decided_by for v in served.at_once] != []  # denied by the rule, at once
            del read, served
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # What a child sent and was answered is not held: far less than one hostile floor per ask.
    assert kept < ASKS * FLOOR_CHARS // 4, f"{kept} bytes kept after {ASKS} answered asks"


def test_asks_naming_ever_new_surfaces_grow_no_cache_without_bound(tmp_path: Path) -> None:
    """Every bounded cache on the way (`_alike`: 1,024, `Compiled._plans`: 256, the kept judgments) is in
    the same phase after 4,096 and 8,192 asks of one new surface each (and a cache of another bound
    differs by its size at most, far less than the limit): what grows between is unbounded."""
    authority = _authority(tmp_path)
    clock = authority.clock
    assert isinstance(clock, ManualClock)
    at_once = AtOnce("s", authority, clock, 60_000, DenyingArbiter(clock).decide_at_once)
    inbox = SessionInbox(Path("/nonexistent"), "s")
    for n in range(3):
        at_once.serve(inbox, Intake([_read(n, None)], frozenset(), {}))

    def burst(first: int, count: int) -> int:
        for n in range(first, first + count):
            clock.advance(0.001)
            read = _read(100 + n, None, f"s{n:06d}" + "x" * 500)
            served = at_once.serve(inbox, Intake([read], frozenset(), {}))
            assert served.at_once or served.judged  # answered (the fail-safe) or left to the route
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    gc.collect()
    tracemalloc.start()
    try:
        half = burst(0, 4096)
        whole = burst(4096, 4096)
    finally:
        tracemalloc.stop()
    assert whole - half < 4096 * 500 // 2, f"{whole - half} bytes more kept after 4,096 more asks"
