"""The judgment stage returns a decision (or none, to escalate): limits first, then this node's rules,
then the chain; every denial without a person carries a reason the agent can read."""

from __future__ import annotations

import json
from pathlib import Path

from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.serving.judgment import NoRecordedAuthority, judge_ask, review_by_chain
from core.testing import ManualClock
from core.vocabulary.asks import Judgment
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest
from tests.helpers import request_body
from tests.history.support import S, intent

CLOCK = ManualClock(1_800_000_000.0)


def parsed(*values: str) -> ParsedRequest:
    fields = {"accessIntent": intent("bash", *values)} if values else {}
    return parse_request(json.dumps(request_body("r1", S, **fields)).encode())


def authority(tmp_path: Path, permission: dict[str, object]) -> RecordedAuthority:
    config = tmp_path / "agent" / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": permission}))
    return RecordedAuthority(PolicyStore(tmp_path / "agent", None, None, home="/home/me"))


def test_without_facts_or_rules_nobody_decides() -> None:
    judgment, decision = judge_ask(NoRecordedAuthority(), parsed(), S, CLOCK)
    assert judgment.verdict == "ask" and decision is None


def test_over_the_limits_is_denied_before_any_rule_with_the_reason(tmp_path: Path) -> None:
    judge = authority(tmp_path, {"bash": {"*": "allow"}})
    judgment, decision = judge_ask(judge, parsed(*(["ls"] * 300)), S, CLOCK)
    assert judgment.verdict == "deny" and decision is not None and decision.outcome == "over-limit"
    response = decision.response
    assert not response.approved and response.state == "denied_with_reason"
    assert "matchValues has 300 entries" in (response.denial_reason or "")
    assert response.responded_at == 1_800_000_000_000


def test_a_rule_decides_with_its_provenance(tmp_path: Path) -> None:
    rules = {"*": "ask", "ls *": "allow", "rm *": {"action": "deny", "reason": "no"}}
    judge = authority(tmp_path, {"bash": rules})
    _, allowed = judge_ask(judge, parsed("ls x"), S, CLOCK)
    _, denied = judge_ask(judge, parsed("rm x"), S, CLOCK)
    judgment, asked = judge_ask(judge, parsed("cat x"), S, CLOCK)
    assert allowed is not None and allowed.outcome == "rule" and allowed.response.approved
    assert allowed.response.decided_by is not None and allowed.response.decided_by.kind == "rule"
    assert denied is not None and denied.response.state == "denied_with_reason"
    assert denied.response.denial_reason == "no"
    assert asked is None and judgment.verdict == "ask"


class Links:
    """A chain of its own (the seam `core.serving.judgment.Chain`): one answer, or a failure."""

    def __init__(self, verdict: Judgment | None, fails: bool = False) -> None:
        self.verdict, self.fails = verdict, fails

    async def review(self, parsed: ParsedRequest) -> Judgment | None:
        if self.fails:
            raise RuntimeError("link crashed")
        return self.verdict


async def test_the_chain_decides_defers_or_fails_as_defer() -> None:
    allow = Judgment(verdict="allow")
    reviewed = await review_by_chain(Links(allow), parsed("ls"), S, CLOCK, "label")
    assert reviewed is not None and reviewed[1].outcome == "chain" and reviewed[1].response.approved
    assert await review_by_chain(Links(None), parsed("ls"), S, CLOCK, "label") is None
    assert await review_by_chain(Links(allow, fails=True), parsed("ls"), S, CLOCK, "label") is None
