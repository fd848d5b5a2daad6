"""A policy's compiled reading of plain asks (`core.rules.compiled`) says exactly what the full
judgment (`core.rules.resolver.resolve_uncached`, both readings) says, whenever it answers.

Configs drawn at random (every layer, families, wildcards over surfaces, array-index keys pi orders
first, home forms, `?`, beyond the BMP, invalid values, an invalid project scope, yolo, an agent
file, pi-authorizer's own `--rules` file), session grants, and hostile facts (padded and odd surfaces,
comment lines, empty and many values, floors, suspicious agents): the verdict, `decidedBy`, denial
reason and the grant that decided are the full judgment's. And plain asks are answered: the common
shapes never fall back to the full judgment.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core.rules import IntentFacts, PolicyStore
from core.rules.compiled import Decided
from core.rules.policy import Policy
from core.rules.resolver import resolve_uncached
from core.rules.session_grants import grant_rules
from core.wire.decisions import SessionApprovalDecision
from tests.rules.support import (
    ASK_AGENTS,
    ASK_FLOORS,
    ASK_SURFACES,
    ASK_VALUE_LISTS,
    GRANTS,
    HOME,
    Layout,
    hostile_layout,
)

FACTS = st.builds(IntentFacts, ASK_SURFACES, ASK_VALUE_LISTS.map(tuple), st.none(), ASK_FLOORS)
#: Asks as most children make them: a plain surface, ASCII values (what the compiled reading answers).
PLAIN = st.builds(IntentFacts, st.sampled_from(["bash", "read", "path_read", "path_write", "mcp", "skill"]),
                  st.lists(st.text(alphabet="git rm/tmp*?.~ #\n7", max_size=10), max_size=3).map(tuple),
                  st.none(), ASK_FLOORS)


def same_as_full(policy: Policy, session: tuple, facts: IntentFacts) -> Decided | None:  # type: ignore[type-arg]
    """The compiled answer, checked against the full judgment when there is one."""
    decided = policy.compiled(session).decide(facts.surface, facts.match_values, facts.floor)
    if decided is None:
        return None
    full = resolve_uncached(policy, facts, session)
    grant = full.decision if isinstance(full.decision, SessionApprovalDecision) else None
    assert (decided.verdict, decided.decision, decided.reason, decided.grant) == (
        full.verdict, full.decision, full.deny_reason, grant), facts
    return decided


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), grants=GRANTS, agent=ASK_AGENTS, asks=st.lists(FACTS | PLAIN, min_size=1, max_size=12))
def test_the_compiled_reading_is_the_full_judgment(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, grants: list[tuple[str, str]], agent: str,
    asks: list[IntentFacts],
) -> None:
    root = tmp_path_factory.mktemp("compiled")
    layout, rules = data.draw(hostile_layout(root))
    policy = PolicyStore(layout.agent_dir, layout.project, rules, home=HOME).policy(agent)
    session = tuple(rule for surface, pattern in grants for rule in grant_rules(surface, pattern, HOME))
    answered = 0
    for facts in asks:
        answered += same_as_full(policy, session, facts) is not None
        same_as_full(policy, session, facts)  # the second time from what the first one kept
    event(f"answered by the compiled reading: {round(4 * answered / len(asks))}/4 of the asks")


@pytest.mark.parametrize(("surface", "values", "floor", "verdict"), [
    ("bash", ("git status 1",), None, "allow"),
    ("bash", ("git push -f",), None, "deny"),
    ("bash", ("  git status  ",), None, "allow"),
    ("bash", ("# a comment\ngit status",), None, "allow"),
    ("bash", ("git status",), "ask", "ask"),
    ("bash", ("make all",), None, "allow"),  # the session grant
    ("bash", ("rm -rf /",), None, "deny"),  # a grant never beats a config deny
    ("bash", (), None, "ask"),
    ("path_read", ("/tmp/a", "/home/me/a"), None, "allow"),
    ("path_write", ("/etc/passwd",), None, "deny"),
    ("path_write", ("/tmp/a",), "deny", "ask"),  # a floor turns an allow into ask, whatever it says
    ("read", ("/home/me/x",), None, "allow"),
    ("mcp", ("srv:q", "other"), None, "allow"),
    ("tool", (), None, "ask"),
    ("skill", ("7", "8"), None, "allow"),
])
def test_plain_asks_are_answered_without_the_full_judgment(
    tmp_path: Path, surface: str, values: tuple[str, ...], floor: str | None, verdict: str,
) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {
        "bash": {"*": "ask", "git *": "allow", "git push *": "deny",
                 "rm *": {"action": "deny", "reason": "no"}},
        "path": {"*": "ask", "/tmp/*": "allow"}, "path_write": {"/etc/*": "deny"},
        "read": {"~/*": "allow"}, "mcp": {"srv:*": "allow"}, "skill": {"7": "allow"}}})
    rules = layout.write(tmp_path / "rules.json", {"permission": {"bash": {"git push *": "allow"}}})
    policy = PolicyStore(layout.agent_dir, layout.project, rules, home=HOME).policy("Explore")
    session = grant_rules("bash", "make *", HOME) + grant_rules("bash", "rm *", HOME)
    decided = same_as_full(policy, session, IntentFacts(surface, values, None, floor))
    assert decided is not None and decided.verdict == verdict


def test_asks_pi_would_read_otherwise_are_left_to_the_full_judgment(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "ask", "git *": "allow"},
                                        "skill": {"x": "allow", "0": "deny"}, "tool": "allow"}})
    policy = PolicyStore(layout.agent_dir, layout.project, None, home=HOME).policy("Explore")
    compiled = policy.compiled(())
    assert compiled.decide("bash", ("git \U0001f600",), None) is None  # beyond the BMP: pi's `?` differs
    assert compiled.decide("skill", ("x",), None) is None  # array-index keys: pi orders them first
    assert compiled.decide("tool", ("a",), None) is None  # pi judges a tool on "*"
    assert compiled.decide("bash ", ("git x",), None) is None  # pi trims a tool's name
    assert compiled.decide("bash", ("git \u00e9",), None) is not None  # within the BMP: one reading
    layout.write_global({"permission": {"path": {"/tmp/*": "allow"}}})
    policy = PolicyStore(layout.agent_dir, layout.project, None, home=HOME).policy("Explore")
    assert policy.compiled(()).decide("path", ("/tmp/a",), None) is None  # 20.7.3 knows no families
