"""Rule suggestions from repeated approvals: offered, previewed, confirmed, never loosening a deny."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from core.history import HistoryStore
from core.history.rows import facts_columns
from core.history.rule_edit import apply, preview, targets
from core.history.suggest import SuggestionRefused, suggest
from core.rules import PolicyStore
from core.wire.reader import parse_request
from tests.helpers import request_body
from tests.history.support import S, intent, suggestion


class Node:
    def __init__(self, tmp_path: Path, permission: dict[str, Any]) -> None:
        self.agent_dir = tmp_path / "agent"
        config = self.agent_dir / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"permission": permission}))
        self.rules_file = tmp_path / "rules.json"
        self.rules = PolicyStore(self.agent_dir, None, self.rules_file, home="/home/me")
        self.history = HistoryStore(tmp_path / "history.sqlite3")
        self.n = 0

    def decided(
        self,
        value: str,
        verdict: str = "approved",
        pattern: str | None = "git status *",
        agent: str = "Explore",
    ) -> None:
        self.n += 1
        extra: dict[str, Any] = {"accessIntent": intent("bash", value, agent=agent)}
        if pattern:
            extra["sessionApproval"] = suggestion("bash", pattern)
        parsed = parse_request(json.dumps(request_body(f"r{self.n}", S, **extra)).encode())
        self.history.insert_rows(
            [
                {
                    "served_session": S,
                    "request_name": f"r{self.n}.json",
                    "arrived_at": time.time() + self.n,
                    "outcome": "user",
                    "verdict": verdict,
                    "raw": parsed.raw,
                    **facts_columns(parsed),
                }
            ]
        )


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path, {"bash": {"*": "ask", "rm *": "deny"}})


def test_five_approvals_of_one_suggestion_offer_that_rule(node: Node) -> None:
    for value in ("git status", "git status -s", "git status", "git status --short", "git status"):
        node.decided(value)
    [offer] = suggest(node.history, node.rules)
    assert offer.rule_json() == {"permission": {"bash": {"git status *": "allow"}}}
    assert offer.approvals == 5 and offer.agents == ("Explore",)
    assert offer.examples == ("git status", "git status --short", "git status -s")
    assert targets(node.rules)[0].path == node.rules_file and targets(node.rules)[0].kind == "authorizer"


def test_four_approvals_are_not_enough(node: Node) -> None:
    for _ in range(4):
        node.decided("git status")
    assert suggest(node.history, node.rules) == []


def test_exact_values_are_offered_when_the_child_sent_no_suggestion(node: Node) -> None:
    for _ in range(5):
        node.decided("make test", pattern=None)
    assert [(o.surface, o.pattern) for o in suggest(node.history, node.rules)] == [("bash", "make test")]


def test_never_offered_when_it_would_loosen_an_explicit_deny(tmp_path: Path) -> None:
    node = Node(tmp_path, {"bash": {"*": "ask", "git status --ignored *": "deny"}})
    for _ in range(6):
        node.decided("git status")
    assert suggest(node.history, node.rules) == []


def test_a_deny_in_another_agents_file_also_blocks_the_offer(tmp_path: Path) -> None:
    node = Node(tmp_path, {"bash": {"*": "ask"}})
    (node.agent_dir / "agents").mkdir()
    agent_file = node.agent_dir / "agents" / "Plan.md"
    agent_file.write_text("---\npermission:\n  bash:\n    git status: deny\n---\n")
    node.decided("ls", pattern="ls", agent="Plan")
    for _ in range(5):
        node.decided("git status")
    assert suggest(node.history, node.rules) == []  # the rules file applies to Plan too


def test_never_offered_when_the_person_denied_something_it_covers(node: Node) -> None:
    for _ in range(5):
        node.decided("git status")
    node.decided("git status --ignored", verdict="denied")
    assert suggest(node.history, node.rules) == []


def test_preview_then_apply_preserves_the_rest_of_the_file(node: Node) -> None:
    config = {"yoloMode": False, "permission": {"bash": "ask", "read": "allow"}}
    node.rules_file.write_text(json.dumps(config))
    node.rules_file.chmod(0o640)
    for _ in range(5):
        node.decided("git status")
    [offer] = suggest(node.history, node.rules)
    change = preview(offer, node.rules_file)
    assert '+      "git status *": "allow"' in change.diff
    assert json.loads(node.rules_file.read_text())["permission"]["bash"] == "ask"  # nothing written yet
    apply(offer, node.rules_file, confirmed=change, rules=node.rules)
    assert json.loads(node.rules_file.read_text()) == {
        "yoloMode": False,
        "permission": {"bash": {"*": "ask", "git status *": "allow"}, "read": "allow"},
    }
    assert node.rules_file.stat().st_mode & 0o777 == 0o640
    node.rules.reload_if_changed()
    assert suggest(node.history, node.rules) == []  # now covered by the rule


def test_apply_refuses_a_file_changed_since_the_preview(node: Node) -> None:
    for _ in range(5):
        node.decided("git status")
    [offer] = suggest(node.history, node.rules)
    change = preview(offer, node.rules_file)
    node.rules_file.write_text('{"permission": {"bash": {"git *": "ask"}}}')
    with pytest.raises(SuggestionRefused, match="changed since the preview"):
        apply(offer, node.rules_file, confirmed=change)
    assert json.loads(node.rules_file.read_text()) == {"permission": {"bash": {"git *": "ask"}}}


def test_apply_rechecks_the_deny_guard_and_refuses_comments(node: Node) -> None:
    for _ in range(5):
        node.decided("git status")
    [offer] = suggest(node.history, node.rules)
    node.rules_file.write_text('{"permission": {"bash": {"git status -u *": "deny"}}}')
    node.rules.reload_if_changed()
    with pytest.raises(SuggestionRefused, match="loosen an explicit deny"):
        apply(offer, node.rules_file, rules=node.rules)
    node.rules_file.write_text('// mine\n{"permission": {}}')
    with pytest.raises(SuggestionRefused, match="comments"):
        preview(offer, node.rules_file)
