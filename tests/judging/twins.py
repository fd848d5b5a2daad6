"""Two recorded authorities fed alike (the same hostile layout, grants and config reloads): the one
driver of the property tests that set a fast judgment against the whole one."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.intake import FileRead, Intake
from core.serving.judgment import judge_ask
from core.testing import ManualClock
from core.vocabulary.asks import Decision, DenyingArbiter, Judgment
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest, SessionGrant
from tests.rules.support import CONFIG, HOME, hostile_layout

PLAIN_SURFACES = st.sampled_from(["bash", "read", "path_read", "path_write", "mcp", "skill"])
PLAIN_VALUES = st.lists(st.text(alphabet="git rm/tmp*?.~ #\n7", max_size=10), max_size=3)

#: Judges one ask in `session` with both authorities (the fast one first) and compares.
Judged = Callable[[RecordedAuthority, RecordedAuthority, ParsedRequest, str], None]


def judge_alike(
    root: Path, data: st.DataObject, grants: list[tuple[str, str]], asks: list[dict[str, Any]],
    reload_at: int, clock: ManualClock, judged: Judged,
) -> tuple[RecordedAuthority, RecordedAuthority]:
    """Each ask judged new, seen once and kept, in two sessions, by both authorities; the global
    config replaced before ask `reload_at`; the grants counted alike at the end. The two (fast,
    whole), for what a test looks at after."""
    layout, rules = data.draw(hostile_layout(root))
    authorities = [RecordedAuthority(PolicyStore(layout.agent_dir, layout.project, rules, home=HOME,
                                                 accept_widening=True), clock) for _ in range(2)]
    fast, whole = authorities
    for surface, pattern in grants:  # recorded alike in both, refused alike
        for authority in authorities:
            book = authority.grants_for("s1")
            if not book.would_shadow_deny("Explore", surface, pattern):
                authority.record("s1", [SessionGrant(surface=surface, pattern=pattern)], "Explore")
    for n, body in enumerate(asks):
        if n == reload_at:
            fresh = layout.global_config.with_suffix(".new")
            fresh.write_text(json.dumps(data.draw(CONFIG)))
            os.replace(fresh, layout.global_config)
            assert fast.store.reload_if_changed() == whole.store.reload_if_changed()
        for session in ("s1", "s2"):
            for _ in range(3):  # new, seen once, kept
                judged(fast, whole, parse_request(json.dumps(body).encode()), session)
    assert [g.decided for g in fast.list_grants()] == [g.decided for g in whole.list_grants()]
    return fast, whole


def grant_in_both(
    authorities: Sequence[RecordedAuthority], sessions: Sequence[str], grant: tuple[str, str]
) -> None:
    """A grant of `(surface, pattern)` to Explore recorded alike in each session of each authority,
    where it would shadow no deny."""
    for authority in authorities:
        for session in sessions:
            if not authority.grants_for(session).would_shadow_deny("Explore", *grant):
                authority.record(session, [SessionGrant(surface=grant[0], pattern=grant[1])], "Explore")


def revoke_first_two(authorities: Sequence[RecordedAuthority]) -> None:
    """The first two grants each authority lists, revoked alike."""
    for authority in authorities:
        for entry in authority.list_grants()[:2]:
            assert authority.revoke_grant(entry.session_id, entry.grant_id)


def assert_lane_judged_as_whole(
    served: Intake, reads: Sequence[tuple[str, FileRead]], whole: RecordedAuthority, session: str,
    clock: ManualClock, arbiter: DenyingArbiter,
) -> None:
    """Each read judged by the lane (`served`) as the whole judgment (`judge_ask`, then the fail-safe's
    denial for an ask) judges it: decided at once with the same response, or left with the same
    judgment."""
    decided = {record.key.name: record for record in served.at_once}
    for name, read in reads:
        assert read.parsed is not None
        judgment, decision = judge_ask(whole, read.parsed, session, clock)
        if decision is None and judgment.verdict == "ask":
            taken = arbiter.decide_unasked(session)
            assert isinstance(taken, Decision)
            decision = taken  # the fail-safe's denial
        if decision is None:
            left = served.judged[name]
            assert isinstance(left, Judgment) and name not in decided
            assert (left.verdict, left.decided_by, left.reason) == (
                judgment.verdict, judgment.decided_by, judgment.reason)
            continue
        record = decided[name]
        assert (record.response, record.outcome, record.carried_to) == (
            decision.response, decision.outcome, decision.carried_to), (name, read.raw)
