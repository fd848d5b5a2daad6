"""The merge of pi 20.7.3's reading with the reload gate and the shared neutral policy."""

from __future__ import annotations

import os
from pathlib import Path

from tests.rules.support import Layout, resolve


def _bump(path: Path) -> None:
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))


def _pi_patterns(layout: Layout, agent: str = "Explore") -> list[str]:
    policy = layout.store().policy(agent).pi_reading
    assert policy is not None
    return [r.pattern for r in policy.effective_rules if r.surface == "bash"]


def test_a_held_widening_change_holds_pi_reading_too(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    path = layout.write_project({"permission": {"bash": {"rm *": "deny"}}})
    store = layout.store()
    before = store.policy("Explore")
    assert before.pi_reading is not None
    layout.write_project({"permission": {"bash": {"rm *": "allow"}}})
    _bump(path)
    assert not store.reload_if_changed()
    [pending] = store.pending()
    policy = store.policy("Explore")
    assert policy.pi_reading is not None
    for reading in (policy, policy.pi_reading):
        assert [r.action for r in reading.effective_rules if r.pattern == "rm *"] == ["deny"]
    assert resolve(store, "bash", "rm -rf x").verdict == "deny"
    assert store.accept(pending)
    policy = store.policy("Explore")
    assert policy.pi_reading is not None
    for reading in (policy, policy.pi_reading):
        assert [r.action for r in reading.effective_rules if r.pattern == "rm *"] == ["allow"]


def test_names_without_agent_files_share_the_neutral_policy_with_its_pi_reading(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"git *": "allow"}}})
    store = layout.store()
    first, second = store.policy("a"), store.policy("b")
    assert first.pi_reading is not None and second.pi_reading is not None
    assert first.pi_reading.agent_name == "a" and second.pi_reading.agent_name == "b"
    assert first.effective_rules is second.effective_rules
    assert first.pi_reading.effective_rules is second.pi_reading.effective_rules


def test_pi_reading_loads_unknown_md_while_ours_never_uses_the_name(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_agent("unknown", "permission:\n  bash:\n    'rm *': deny\n")
    store = layout.store()
    policy = store.policy("unknown")
    assert policy.suspicious_agent_reason is not None
    assert policy.pi_reading is not None
    assert any(r.pattern == "rm *" for r in policy.pi_reading.effective_rules)
    assert not any(r.pattern == "rm *" for r in policy.effective_rules)
    assert resolve(store, "bash", "rm -rf x", agent="unknown").verdict == "deny"


def test_an_unknown_md_present_at_start_is_trusted_in_pi_reading(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_agent("unknown", "permission:\n  bash:\n    'git *': allow\n")
    store = layout.store()
    policy = store.policy("unknown")
    assert not store.pending()
    assert policy.pi_reading is not None
    assert any(r.pattern == "git *" for r in policy.pi_reading.effective_rules)


def test_an_odd_agent_name_reads_its_file_in_pi_reading_only(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": "allow"}})
    for name in ("a\u200db", "tab\tname", " "):
        layout.write_agent(name, "permission:\n  bash: deny\n  skill: allow\n")
        store = layout.store()
        assert resolve(store, "bash", "ls", agent=name).verdict == "deny", name
        assert resolve(store, "skill", "lint", agent=name).verdict == "ask", name  # its allow: never
    assert not store.pending()


def test_a_name_with_a_separator_is_followed_inside_the_agents_folder_only(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": "allow"}})
    layout.write(layout.agent_file("sub/x"), "---\npermission:\n  bash: deny\n---\n")
    layout.write(layout.agent_file("x").parent.parent / "y.md", "---\npermission:\n  bash: deny\n---\n")
    store = layout.store()
    assert resolve(store, "bash", "ls", agent="sub/x").verdict == "deny"
    assert resolve(store, "bash", "ls", agent="../y").verdict == "allow"  # not followed out
    assert not store.pending()


def test_a_change_to_a_file_only_pi_reads_is_applied_without_review(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": "allow"}})
    path = layout.write_agent("a\u200db", "permission:\n  skill: deny\n")
    store = layout.store()
    assert resolve(store, "bash", "ls", agent="a\u200db").verdict == "allow"
    layout.write_agent("a\u200db", "permission:\n  bash: deny\n")
    _bump(path)
    assert store.reload_if_changed()
    assert not store.pending()
    assert resolve(store, "bash", "ls", agent="a\u200db").verdict == "deny"
    assert path in store.watched_paths()
