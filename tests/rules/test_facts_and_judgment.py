"""The child owns the facts, this node owns the judgment (`docs/design/contract.md` § Facts and judgment)."""

from __future__ import annotations

from pathlib import Path

from core.rules import explain_no_facts, render_trail
from tests.rules.support import Layout, resolve

WORKTREE_ALIASES = ("/worktree/issue-42/src/foo.ts", "src/foo.ts")


def test_relative_parent_rule_covers_another_worktree(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path_read": {"src/*": "allow"}}})
    result = resolve(layout.store(), "path_read", *WORKTREE_ALIASES,
                     boundary_value=WORKTREE_ALIASES[0])
    assert result.verdict == "allow"
    assert result.outcome is not None and result.outcome.value == "src/foo.ts"


def test_absolute_parent_rule_does_not_cover_a_different_worktree(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path_read": {"/main-checkout/src/*": "allow"}}})
    assert resolve(layout.store(), "path_read", *WORKTREE_ALIASES).verdict == "ask"


def test_values_are_not_renormalized_against_this_nodes_cwd(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path_read": {f"{layout.project}/src/*": "allow"}}})
    assert resolve(layout.store(), "path_read", "src/foo.ts").verdict == "ask"


def test_parent_per_agent_override_changes_only_that_agent(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path_read": {"*": "ask"}}})
    layout.write_agent("Explore", 'permission:\n  path_read:\n    "src/*": allow\n', project=True)
    store = layout.store()
    explore = resolve(store, "path_read", *WORKTREE_ALIASES, agent="Explore")
    assert explore.verdict == "allow"
    assert explore.decided_by() == {"kind": "rule", "surface": "path_read", "pattern": "src/*",
                                    "origin": "project-agent"}
    assert resolve(store, "path_read", *WORKTREE_ALIASES, agent="Plan").verdict == "ask"


def test_identical_parent_and_child_configs_still_ask(tmp_path: Path) -> None:
    child_config = {"permission": {"*": "ask", "bash": {"git status": "allow", "git *": "ask"}}}
    layout = Layout(tmp_path)
    layout.write_global(child_config)
    # The child forwarded `git push` because its identical config left it at ask.
    assert resolve(layout.store(), "bash", "git push origin main").verdict == "ask"


def test_no_facts_always_asks_and_never_consults_rules() -> None:
    result = explain_no_facts("bash")
    assert result.verdict == "ask"
    assert result.decided_by() is None
    assert result.rule is None
    assert result.trail[0]["step"] == "no-facts"
    assert "version-skew floor" in render_trail(result.trail)[0]
