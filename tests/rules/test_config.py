"""Config layers: merge order and positions, strict validation, fail-closed, reload."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.rules import PolicyStore
from tests.rules.support import Layout, resolve


def config_rules(store: PolicyStore, agent: str = "Explore") -> list[tuple[str, str, str, str]]:
    return [(r.surface, r.pattern, r.action, r.origin)
            for r in store.policy(agent).rules if r.layer == "config"]


def test_merge_order_global_project_agent_project_agent_authorizer(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"a": "deny", "b": "deny", "c": "deny",
                                                 "d": "deny", "e": "deny"}}})
    layout.write_project({"permission": {"bash": {"b": "ask", "c": "ask", "d": "ask", "e": "ask"}}})
    layout.write_agent("Explore", "permission:\n  bash:\n    c: allow\n    d: allow\n    e: allow\n")
    layout.write_agent("Explore", "permission:\n  bash:\n    d: deny\n    e: deny\n", project=True)
    rules = layout.write(tmp_path / "rules.json", {"permission": {"bash": {"e": "allow"}}})
    got = config_rules(layout.store(rules))
    assert got == [
        ("bash", "a", "deny", "global"),
        ("bash", "b", "ask", "project"),
        ("bash", "c", "allow", "agent"),
        ("bash", "d", "deny", "project-agent"),
        ("bash", "e", "allow", "authorizer"),
    ]


def test_deep_shallow_merge_keeps_positions_and_appends(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"x *": "allow", "*": "ask"}, "read": "allow",
                                        "edit": {"a": "deny"}}})
    layout.write_project({"permission": {"bash": {"x *": "deny", "y": "allow"}, "read": {"s": "deny"},
                                         "edit": "ask", "write": "deny"}})
    assert config_rules(layout.store()) == [
        ("bash", "x *", "deny", "project"),  # overriding key keeps its original position
        ("bash", "*", "ask", "global"),
        ("bash", "y", "allow", "project"),  # new key appended
        ("read", "s", "deny", "project"),  # object over string replaces the surface whole
        ("edit", "*", "ask", "project"),  # string over object replaces the surface whole
        ("write", "*", "deny", "project"),
    ]
    # `x *` now precedes the `*` catch-all, so the catch-all wins for `x y`.
    assert resolve(layout.store(), "bash", "x y").verdict == "ask"


def test_bare_family_is_sugar_read_then_write(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path_read": {"/a/*": "allow"},
                                        "path": {"*": "deny"}}})
    got = config_rules(layout.store())
    assert got == [
        ("path_read", "*", "deny", "global"),
        ("path_read", "/a/*", "allow", "global"),
        ("path_write", "*", "deny", "global"),
    ]


def test_higher_scope_bare_family_overrides_lower_directional(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path_read": {"*": "allow"}}})
    layout.write_project({"permission": {"path": {"/secret/*": "deny"}}})
    assert resolve(layout.store(), "path_read", "/secret/x").verdict == "deny"


def test_universal_key_is_the_default_rule(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    store = layout.store()
    default = store.policy("Explore").rules[0]
    assert (default.surface, default.pattern, default.action, default.origin, default.layer) == (
        "*", "*", "ask", "builtin", "default")
    layout.write_project({"permission": {"*": "deny"}})
    store.reload_if_changed()
    default = store.policy("Explore").rules[0]
    assert (default.action, default.origin) == ("deny", "project")


def test_mcp_baseline_only_with_an_mcp_allow(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"mcp": {"exa:*": "allow", "mcp_list": "deny"}}})
    store = layout.store()
    baseline = [r.pattern for r in store.policy("x").rules if r.layer == "baseline"]
    assert baseline == ["mcp_status", "mcp_list", "mcp_search", "mcp_describe", "mcp_connect"]
    assert resolve(store, "mcp", "mcp_status").decided_by() == {
        "kind": "rule", "surface": "mcp", "pattern": None, "origin": "baseline"}
    assert resolve(store, "mcp", "mcp_list").verdict == "deny"
    layout.write_global({"permission": {"mcp": {"exa:*": "ask"}}})
    assert store.reload_if_changed() is False  # a new ask may override a deny: held for review
    [pending] = store.pending()
    assert store.accept(pending)
    assert resolve(store, "mcp", "mcp_status").verdict == "ask"


@pytest.mark.parametrize(
    ("document", "key", "reason"),
    [
        ({"permision": {}}, "permision", "Unrecognized config key"),
        ({"yoloMode": "yes"}, "yoloMode", "Invalid config value"),
        ({"forwardingTimeoutMs": 0}, "forwardingTimeoutMs", "Invalid config value"),
        ({"forwardingTimeoutMs": True}, "forwardingTimeoutMs", "Invalid config value"),
        ({"promptNotifications": ["beep"]}, "promptNotifications", "Invalid config value"),
        ({"permissionDialogKeys": {"approv": "1"}}, "permissionDialogKeys", "Invalid config value"),
        ({"permission": {"bash": "maybe"}}, "permission.bash", "Invalid config value"),
        ({"permission": {"bash": {"x": "maybe"}}}, "permission.bash.x", "Invalid config value"),
        ({"permission": {"bash": {"x": {"action": "allow"}}}}, "permission.bash.x",
         "Invalid config value"),
        ({"permission": {"path_wrote": {"*": "deny"}}}, "permission.path_wrote",
         "Invalid config value"),
        ({"permission": {"": "deny"}}, "permission.", "Invalid config value"),
        ({"permission": []}, "permission", "Invalid config value"),
        ([], "(root)", "Invalid config value"),
    ],
)
def test_invalid_project_scope_is_reported_and_fails_closed(
    tmp_path: Path, document: object, key: str, reason: str
) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"git *": "allow", "rm *": "deny"}, "read": "ask"}})
    path = layout.write_project(document if isinstance(document, dict) else "[]")
    store = layout.store()
    policy = store.policy("Explore")
    assert [(e.path, e.key) for e in policy.errors] == [(str(path), key)]
    assert policy.errors[0].reason.startswith(reason)
    assert policy.fail_closed_scopes == ("project",)
    git = resolve(store, "bash", "git status")
    assert git.verdict == "ask"
    assert git.rule is not None and git.rule.origin == "fail-closed"
    assert resolve(store, "bash", "rm x").verdict == "deny"


def test_yolo_repermits_a_fail_closed_policy(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"yoloMode": True, "permission": {"bash": {"rm *": "deny"}}})
    layout.write_project("{ not json")
    store = layout.store()
    assert store.policy("x").errors[0].reason.startswith("JSON parse error")
    allowed = resolve(store, "bash", "ls")
    assert (allowed.verdict, allowed.outcome and allowed.outcome.origin) == ("allow", "yolo")
    assert resolve(store, "bash", "rm x").verdict == "deny"


def test_invalid_global_scope_is_just_empty(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"ls": "allow"}}, "bogus": 1})
    layout.write_project({"permission": {"bash": {"pwd": "allow"}}})
    store = layout.store()
    policy = store.policy("x")
    assert policy.fail_closed_scopes == ()
    assert [e.key for e in policy.errors] == ["bogus"]
    assert resolve(store, "bash", "ls").verdict == "ask"
    assert resolve(store, "bash", "pwd").verdict == "allow"


def test_unreadable_project_file_is_a_scope_error(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.project_config.mkdir(parents=True)  # a directory where the file should be
    policy = layout.store().policy("x")
    assert policy.errors[0].key == "(file)" and "unreadable" in policy.errors[0].reason
    assert policy.fail_closed_scopes == ("project",)


def test_comments_are_accepted(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global('{\n // note\n "permission": {"bash": {"a//b": /* x */ "allow"}}\n}')
    assert resolve(layout.store(), "bash", "a//b").verdict == "allow"


def test_knobs_come_from_config_files_only(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    store = layout.store()
    settings = store.policy("x").settings
    assert (settings.yolo_mode, settings.double_press_to_confirm, settings.forwarding_timeout_ms,
            settings.prompt_notifications) == (False, True, 600000, ())
    layout.write_global({"doublePressToConfirm": False, "forwardingTimeoutMs": 5000,
                         "promptNotifications": ["bell"], "authorizerChain": ["judge"],
                         "permissionDialogKeys": {"approve": "1"}})
    layout.write_project({"forwardingTimeoutMs": 7000})  # a layer children write: ignored
    layout.write_agent("x", "yoloMode: true\npermission:\n  bash: allow\n")
    rules = layout.write(tmp_path / "rules.json", {"promptNotifications": ["osc9"]})
    settings = layout.store(rules).policy("x").settings
    assert settings.double_press_to_confirm is True  # no file turns it off (issue 34 finding 3)
    assert settings.ignored_knobs == ("global: doublePressToConfirm", "project: forwardingTimeoutMs")
    assert settings.dialog_keys_origin == "global"
    assert settings.forwarding_timeout_ms == 5000
    assert settings.prompt_notifications == ("osc9",)
    assert settings.permission_dialog_keys == {"approve": "1"}
    assert settings.yolo_mode is False


def test_invalid_rules_file_fails_closed_as_authorizer(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": "allow"}})
    rules = layout.write(tmp_path / "rules.json", {"permission": {"bash": {"x": "nope"}}})
    policy = layout.store(rules).policy("x")
    assert policy.fail_closed_scopes == ("authorizer",)
    assert policy.errors[0].path == str(rules)


@pytest.mark.parametrize("name", ["../x", "a/b", "a\\b", "a\x00b", "", "  ", "unknown",
                                  "UNKNOWN", "a\nb", "..", "a\u200bb"])
def test_suspicious_agent_names_load_no_agent_file(tmp_path: Path, name: str) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"ls": "ask"}}})
    (layout.agent_dir / "x.md").write_text("---\npermission:\n  bash: allow\n---\n")
    layout.write_agent("x", "permission:\n  bash: allow\n")
    store = layout.store()
    policy = store.policy(name)
    assert policy.suspicious_agent_reason is not None
    assert all("agents" not in s.path for s in policy.sources)
    assert resolve(store, "bash", "ls", agent=name).verdict == "ask"


def test_ordinary_agent_name_is_not_suspicious(tmp_path: Path) -> None:
    policy = Layout(tmp_path).store().policy("code-reviewer.v2")
    assert policy.suspicious_agent_reason is None


def test_agent_frontmatter_parsing(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_agent("x", (
        "name: x\n"
        "description: >\n"
        "  folded text: with a colon\n"
        "tools:\n"
        "  - read\n"
        "permission:  # the rules\n"
        "  bash:\n"
        "    \"git *\": allow   # quoted key with a space\n"
        "    'it''s': ask\n"
        "    \"rm *\":\n"
        "      action: deny\n"
        "      reason: \"not here\"\n"
        "  read: deny\n"
        "model: gpt\n"
    ))
    store = layout.store()
    assert config_rules(store, "x") == [
        ("bash", "git *", "allow", "agent"),
        ("bash", "it's", "ask", "agent"),
        ("bash", "rm *", "deny", "agent"),
        ("read", "*", "deny", "agent"),
    ]
    assert resolve(store, "bash", "rm -rf /", agent="x").deny_reason == "not here"


@pytest.mark.parametrize("frontmatter", [
    "permission:\n  bash:\n    - ls\n",
    "permission: {bash: allow}\n",
    "permission:\n  bash: sometimes\n",
])
def test_bad_frontmatter_permission_fails_closed(tmp_path: Path, frontmatter: str) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": "allow"}})
    path = layout.write_agent("x", frontmatter)
    policy = layout.store().policy("x")
    assert policy.fail_closed_scopes == ("agent",)
    assert policy.errors and policy.errors[0].path == str(path)


@pytest.mark.parametrize(("frontmatter", "expected"), [
    # Tabs indent like spaces, one column each (pi: a tab-indented deny is a deny).
    ("permission:\n\tbash: deny\n", [("bash", "*", "deny", "agent")]),
    ("permission:\n\tbash:\n\t\t\"rm *\": deny\n", [("bash", "rm *", "deny", "agent")]),
    # Ragged siblings join the nearest open map indented less than them.
    ("permission:\n  bash:\n      a: allow\n    b: deny\n",
     [("bash", "a", "allow", "agent"), ("bash", "b", "deny", "agent")]),
    # An empty nested map says nothing: the global entry for that surface stands.
    ("permission:\n  bash:\n  read: deny\n", [("bash", "*", "allow", "global"),
                                               ("read", "*", "deny", "agent")]),
    # A deny reason longer than config.json's 500-character limit is kept in an agent file.
    (f"permission:\n  bash:\n    \"rm *\":\n      action: deny\n      reason: {'r' * 600}\n",
     [("bash", "rm *", "deny", "agent")]),
])
def test_frontmatter_is_read_as_pi_reads_it(
    tmp_path: Path, frontmatter: str, expected: list[tuple[str, str, str, str]]
) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": "allow"}})
    layout.write_agent("x", frontmatter)
    store = layout.store()
    assert store.policy("x").errors == ()
    assert config_rules(store, "x") == expected


def test_reload_if_changed_and_sources(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    path = layout.write_global({"permission": {"bash": {"ls": "allow"}}})
    store = layout.store()
    assert resolve(store, "bash", "ls").verdict == "allow"
    assert store.reload_if_changed() is False
    assert path in store.watched_paths()
    assert layout.agent_file("Explore") in store.watched_paths()
    sources = {s.path: s for s in store.policy("Explore").sources}
    assert sources[str(path)].exists and not sources[str(layout.project_config)].exists

    layout.write_global({"permission": {"bash": {"ls": "deny"}}})
    os.utime(path, ns=(1, 1))  # a same-size rewrite within one mtime tick is still noticed
    assert store.reload_if_changed() is True
    assert resolve(store, "bash", "ls").verdict == "deny"

    layout.write_agent("Explore", "permission:\n  bash: allow\n")
    assert store.reload_if_changed() is False  # widening: held until accepted
    assert resolve(store, "bash", "ls").verdict == "deny"
    [pending] = store.pending()
    assert pending.diff_lines() == ["+ bash: allow  (widens)"]
    assert store.accept(pending) and store.pending() == ()
    assert resolve(store, "bash", "ls").verdict == "allow"
    path.unlink()
    assert store.reload_if_changed() is False  # the global deny removed: widening again
    assert [c.describe() for c in store.pending()[0].changes] == ["~ bash: {'ls': deny} -> (unset)  (widens)"]


def test_policies_are_cached_per_agent(tmp_path: Path) -> None:
    store = Layout(tmp_path).store()
    assert store.policy("a") is store.policy("a")
    assert store.policy("a") is not store.policy("b")


def test_a_child_writable_project_layer_sets_no_person_knob(tmp_path: Path) -> None:
    """Issue 20 finding 5: the project config (children write it) swaps approve and deny and turns
    the double press off; both are ignored, and reported."""
    layout = Layout(tmp_path)
    layout.write_global({"permissionDialogKeys": {"denyWithReason": "x"}})
    layout.write_project({"permissionDialogKeys": {"approve": "n", "deny": "y"},
                          "doublePressToConfirm": False, "promptNotifications": ["osc9"]})
    settings = layout.store().policy("x").settings
    assert settings.permission_dialog_keys == {"denyWithReason": "x"}  # the global layer's, whole
    assert settings.double_press_to_confirm is True
    assert settings.prompt_notifications == ()
    assert sorted(settings.ignored_knobs) == [
        "project: doublePressToConfirm", "project: permissionDialogKeys", "project: promptNotifications"]
    rules = layout.write(tmp_path / "rules.json", {"doublePressToConfirm": False})
    # A same-user child writes the --rules file as well as any other: not from it either (issue 34).
    settings = layout.store(rules).policy("x").settings
    assert settings.double_press_to_confirm is True
    assert "authorizer: doublePressToConfirm" in settings.ignored_knobs


def test_a_child_writable_project_layer_turns_on_no_yolo_and_sets_no_timeout(tmp_path: Path) -> None:
    """`yoloMode` (every ask an allow, no person at all) and `forwardingTimeoutMs` from the project
    config are ignored in this node's reading and reported; pi's reading of the same files keeps
    them (pi reads them); the global layer and the --rules file still set them."""
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "ask"}}})
    layout.write_project({"yoloMode": True, "forwardingTimeoutMs": 1})
    store = layout.store()
    policy = store.policy("x")
    assert (policy.settings.yolo_mode, policy.settings.forwarding_timeout_ms) == (False, 600_000)
    assert sorted(policy.settings.ignored_knobs) == ["project: forwardingTimeoutMs", "project: yoloMode"]
    assert resolve(store, "bash", "rm -rf ~").verdict == "ask"
    assert policy.pi_reading is not None and policy.pi_reading.settings.yolo_mode is True
    rules = layout.write(tmp_path / "rules.json", {"yoloMode": True, "forwardingTimeoutMs": 9000})
    settings = layout.store(rules).policy("x").settings
    assert (settings.yolo_mode, settings.forwarding_timeout_ms) == (True, 9000)
