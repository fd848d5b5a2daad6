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
from core.history.suggest import Suggestion, SuggestionRefused, suggest, suggestion_from_ask
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
        verdict: str = "approved_for_session",
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
    node.rules.reload_if_changed()  # the file as the person reviewed and accepted it: in force
    for pending in node.rules.pending():
        node.rules.accept(pending)
    for _ in range(5):
        node.decided("git status")
    [offer] = suggest(node.history, node.rules)
    change = preview(offer, node.rules_file)
    assert '+      "git status *": "allow"' in change.diff
    # The file had no final newline: its last line is its own diff line, never glued to the next.
    lines = change.diff.splitlines()
    assert lines[lines.index(f"-{json.dumps(config)}") + 1] == "\\ No newline at end of file"
    assert all(line[:1] in "+- @\\" for line in lines)
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


# -- issue 20: `R` and suggestions apply exactly what was shown, never more ------------------------


def test_finding_7_y_on_asks_with_a_child_suggestion_never_credits_the_suggestion(node: Node) -> None:
    """Five `y` (approve once) on `ls` asks whose child suggested `bash *`: the person approved `ls`
    five times, never `*`; no offer claims otherwise."""
    for _ in range(5):
        node.decided("ls", verdict="approved", pattern="*")
    offers = suggest(node.history, node.rules)
    assert [(o.surface, o.pattern, o.approvals) for o in offers] == [("bash", "ls", 5)]


def _ask_rule(node: Node, surface: str, value: str, grants: list[tuple[str, str]],
              agent: str = "Explore") -> Suggestion:
    return suggestion_from_ask(node.rules, surface, (value,), grants, agent, 1.0)


def test_finding_3_a_child_suggestion_on_another_surface_or_not_covering_the_ask_is_not_used(
        node: Node) -> None:
    offer = _ask_rule(node, "bash", "ls", [("read", "*")])
    assert (offer.surface, offer.pattern, offer.from_child) == ("bash", "ls", False)
    offer = _ask_rule(node, "bash", "ls", [("bash", "git *")])
    assert (offer.surface, offer.pattern, offer.from_child) == ("bash", "ls", False)
    offer = _ask_rule(node, "bash", "ls -la", [("bash", "ls *")])
    assert (offer.surface, offer.pattern, offer.from_child) == ("bash", "ls *", True)


def test_finding_2_r_never_loosens_another_agents_deny_the_rules_file_would_override(node: Node) -> None:
    (node.agent_dir / "agents").mkdir()
    (node.agent_dir / "agents" / "Builder.md").write_text(
        "---\npermission:\n  bash:\n    npm publish *: deny\n---\n")
    with pytest.raises(SuggestionRefused, match="loosen an explicit deny"):
        _ask_rule(node, "bash", "npm test", [("bash", "npm *")], agent="Explore")


def test_finding_1_r_refuses_a_file_holding_a_change_not_in_force(node: Node) -> None:
    node.rules_file.write_text(json.dumps({"permission": {"bash": {"git *": "ask"}}}))
    node.rules.reload_if_changed()
    node.rules_file.write_text(json.dumps({"permission": {"bash": {"git *": "ask", "*": "allow"}}}))
    node.rules.reload_if_changed()
    [held] = node.rules.pending()
    offer = _ask_rule(node, "bash", "ls", [])
    with pytest.raises(SuggestionRefused, match="not in force"):
        preview(offer, node.rules_file, node.rules)
    node.rules.decline(held)  # declined: still on disk, still not in force
    with pytest.raises(SuggestionRefused, match="not in force"):
        preview(offer, node.rules_file, node.rules)
    with pytest.raises(SuggestionRefused, match="not in force"):
        apply(offer, node.rules_file, rules=node.rules)
    assert resolve_bash(node, "rm -rf /") == "deny"


def test_finding_1_a_file_swapped_right_after_the_write_is_not_applied_with_it(node: Node) -> None:
    offer = _ask_rule(node, "bash", "ls", [])
    change = preview(offer, node.rules_file, node.rules)
    apply(offer, node.rules_file, confirmed=change, rules=node.rules)
    assert resolve_bash(node, "ls") == "allow"
    # A child renames its own config over the file right after the write.
    node.rules_file.write_text(json.dumps({"permission": {"bash": {"*": "allow"}}}))
    assert resolve_bash(node, "git push") == "ask"  # what was applied is exactly the diff shown
    node.rules.reload_if_changed()
    assert resolve_bash(node, "git push") == "ask" and len(node.rules.pending()) == 1  # held, for review


def resolve_bash(node: Node, command: str) -> str:
    from tests.rules.support import resolve

    return resolve(node.rules, "bash", command).verdict


def test_finding_6_patterns_are_shown_as_they_act_when_that_differs() -> None:
    from core.history.suggest import acts_as

    assert acts_as("$HOME/../../bin/sh -c id", "bash", "/home/me") == "/bin/sh -c id"
    assert acts_as("~/projects/app/../../../../*", "path", "/home/me") == "/*"
    assert acts_as("~/.ssh/*", "read", "/home/me") == "/home/me/.ssh/*"
    assert acts_as("git status *", "bash", "/home/me") is None
    assert acts_as("/srv/app/*", "path", "/home/me") is None


def test_the_rule_dialog_says_whose_pattern_it_is_its_reach_and_how_it_acts(node: Node) -> None:
    from core.history.rule_edit import targets
    from tui.render.history import change_content

    offer = _ask_rule(node, "bash", "ls -la", [("bash", "ls *")])
    target = targets(node.rules)[0]
    text = change_content(preview(offer, node.rules_file, node.rules), target, "/home/me").plain
    assert "the child's pattern" in text and "every agent" in text
    odd = _ask_rule(node, "bash", "$HOME/../../bin/sh -c id", [])
    text = change_content(preview(odd, node.rules_file, node.rules), target, "/home/me").plain
    assert "acts as: /bin/sh -c id" in text and "the child's pattern" not in text


def test_review_suggestions_mark_the_childs_pattern_and_show_how_it_acts(tmp_path: Path) -> None:
    """Everywhere a suggestion is shown (the review's list and its dialog): a pattern the child sent,
    approved as such (`s`, `w`), is "the child's pattern", and a pattern that acts otherwise than
    written shows how it acts."""
    from tui.render.history import change_content, offer_content

    node = Node(tmp_path, {"path": {"*": "ask"}})
    for value in ("ls", "ls -l", "ls -a", "ls x", "ls y"):
        node.decided(value, pattern="ls *")  # approved for the session: the child's pattern credited
    [offer] = suggest(node.history, node.rules)
    assert offer.pattern == "ls *" and offer.from_child
    listed = offer_content(offer, "/home/me").plain
    assert "the child's pattern" in listed
    target = targets(node.rules)[0]
    dialog = change_content(preview(offer, node.rules_file, node.rules), target, "/home/me").plain
    assert "the child's pattern" in dialog

    other = Node(tmp_path / "b", {"path": {"*": "ask"}})
    for n in range(5):
        other.decided(f"$HOME/../../bin/sh -c {n}", pattern="$HOME/../../bin/sh *")
    [odd] = suggest(other.history, other.rules)
    listed = offer_content(odd, "/home/me").plain
    assert "acts as /bin/sh *" in listed and "the child's pattern" in listed
    exact = Node(tmp_path / "c", {"path": {"*": "ask"}})
    for _ in range(5):
        exact.decided("make", verdict="approved", pattern=None)
    [plain] = suggest(exact.history, exact.rules)
    assert "child" not in offer_content(plain, "/home/me").plain and not plain.from_child
