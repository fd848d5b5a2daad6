"""Bounded config loading and policy caching (issue 9 §2): errors that floor, never hang or crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.rules import PolicyStore, sources
from core.rules.bounded_read import MAX_CONFIG_BYTES, MAX_CONFIG_NESTING
from core.rules.config import MAX_CACHED_POLICIES
from tests.rules.support import Layout, resolve


def _errors(store: PolicyStore, agent: str = "Explore") -> list[str]:
    return [f"{e.key}: {e.reason}" for e in store.policy(agent).errors]


def test_an_oversized_config_is_a_config_error_checked_before_reading(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "allow"}}})
    project = layout.project_config
    project.parent.mkdir(parents=True)
    with project.open("wb") as handle:  # sparse: the size is there, the bytes never need reading
        handle.truncate(MAX_CONFIG_BYTES + 1)
    store = layout.store()
    [error] = _errors(store)
    assert "file too large" in error and f"{MAX_CONFIG_BYTES:,}" in error
    assert resolve(store, "bash", "ls").verdict == "ask"  # the invalid project layer floors allows


def test_a_fifo_in_place_of_a_config_is_refused_not_waited_on(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.agent_file("Explore").parent.mkdir(parents=True)
    os.mkfifo(layout.agent_file("Explore"))
    store = layout.store()
    assert any("not a regular file" in e for e in _errors(store))


def test_a_deeply_nested_config_is_a_config_error_that_floors(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": "allow"}})
    deep = "[" * 50_000 + "]" * 50_000
    layout.write_project('{"permission": {"bash": "allow"}, "x": ' + deep + "}")
    store = layout.store()
    assert any(f"nested deeper than {MAX_CONFIG_NESTING}" in e for e in _errors(store))
    assert resolve(store, "bash", "ls").verdict == "ask"


def test_a_deeply_indented_agent_file_is_a_config_error(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    lines = "".join(f"{' ' * (i + 1)}k{i}:\n" for i in range(1_500)) + " " * 1_501 + "x: deny\n"
    layout.write_agent("Explore", "permission:\n" + lines)
    store = layout.store()
    # pi's tolerant frontmatter reader (h-match) reads it without recursing that deep; either way
    # it is a config error of the file, never an exception, and the policy is floored.
    assert any("nested too deeply" in e or "Invalid config value" in e for e in _errors(store))
    assert resolve(store, "bash", "ls").verdict == "ask"


def test_the_policy_cache_is_bounded_and_file_less_names_share_rules(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {f"tool{i} *": "allow" for i in range(50)}}})
    layout.write_agent("Explore", 'permission:\n  bash:\n    "rm *": deny\n')
    store = layout.store()
    first = store.policy("name-0")
    for i in range(3 * MAX_CACHED_POLICIES):
        assert resolve(store, "bash", "tool7 x", agent=f"name-{i}").verdict == "allow"
    assert store.cached_policies() == MAX_CACHED_POLICIES
    assert len(store.watched_paths()) <= 3 + 2 * MAX_CACHED_POLICIES + 2  # configs + cached names' files
    assert store.policy("name-1").rules is first.rules  # compiled once, shared
    assert store.policy("name-1").agent_name == "name-1"
    assert resolve(store, "bash", "rm -rf /", agent="Explore").verdict == "deny"
    assert store.policy("Explore").rules is not first.rules


def test_junk_in_an_agents_folder_does_not_count_as_agent_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21 finding 6: the limit is on agent files; other names, folders and FIFOs named `*.md`
    used to count toward it, so real agents were left out of a grant's deny check."""
    monkeypatch.setattr(sources, "MAX_AGENT_FILES", 3)
    layout = Layout(tmp_path)
    agents = layout.agent_file("Explore").parent
    agents.mkdir(parents=True)
    for n in range(12):
        (agents / f"junk{n}.txt").write_text("x")
        (agents / f"folder{n}.md").mkdir()
        os.mkfifo(agents / f"fifo{n}.md")
    for name in ("Explore", "Plan", "Review"):
        layout.agent_file(name).write_text("---\nname: x\n---\n")
    assert layout.store().known_agents() == ("Explore", "Plan", "Review")
