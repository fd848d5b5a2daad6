"""pi 20.7.3's reading of the same files, and the stricter-of-both verdict (docs/design/fidelity.md); its
merge with the reload gate (a held change holds pi's reading too) and the shared neutral policy."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.rules.frontmatter import FrontmatterError, read_permission_block
from core.rules.matcher import compile_wildcard, utf16_units
from core.rules.pi_reading import facts_as_pi, is_array_index, js_key_order, read_permission_block_as_pi
from core.rules.values import bash_match_value
from core.wire.facts import IntentFacts
from tests.rules.support import Layout, resolve


def test_js_key_order_puts_array_indices_first() -> None:
    assert list(js_key_order({"*": 1, "42": 2, "7": 3, "07": 4, "-1": 5, "4294967295": 6})) == [
        "7", "42", "*", "07", "-1", "4294967295"]
    assert [is_array_index(k) for k in ("0", "00", "1e3", "\u0661", "4294967294")] == [
        True, False, False, False, True]


def test_pi_frontmatter_reader_facts() -> None:
    text = "---\npermission:\n  'exa:*': deny\n  bash: deny  # why\n\tread: allow\n  write:\n---\n"
    # The key splits at its first colon; a comment stays in the value (then invalid, dropped);
    # a tab indents; an empty map is dropped.
    assert read_permission_block_as_pi(text) == {"read": "allow"}
    assert read_permission_block_as_pi("--- \npermission:\n  bash: deny\n---\n") is None
    assert read_permission_block_as_pi("---\r\npermission:\r\n  bash: deny\r\n---\r\n") == {"bash": "deny"}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="-\n\r\t :#'\"abp{}[]\\", max_size=80))
def test_both_frontmatter_readers_survive_any_text(body: str) -> None:
    text = "---\npermission:\n" + body + "\n---\n"
    pi = read_permission_block_as_pi(text)
    assert pi is None or all(isinstance(v, str | dict) for v in pi.values())
    try:
        ours = read_permission_block(text)
    except FrontmatterError as exc:
        assert exc.line_number >= 2
    else:
        assert ours is None or isinstance(ours, dict)


def test_bash_match_value_strips_comment_lines_and_js_whitespace() -> None:
    assert bash_match_value(" rm -rf /") == "rm -rf /"
    assert bash_match_value("# clean\n  # more\nrm -rf build\n") == "rm -rf build"
    assert bash_match_value("\ufeffls\u00a0") == "ls"
    assert bash_match_value("\x1cls") == "\x1cls"  # not JavaScript whitespace
    assert bash_match_value("  # only\n") == "  # only\n"


def test_utf16_question_mark() -> None:
    emoji = "a\U0001f600c"
    assert utf16_units(emoji) == "a\ud83d\ude00c"
    assert compile_wildcard("a??c", utf16=True).matches(emoji)
    assert not compile_wildcard("a?c", utf16=True).matches(emoji)
    assert compile_wildcard("a?c").matches(emoji)
    assert compile_wildcard(emoji, utf16=True).literal == emoji


def test_the_stricter_reading_wins_and_the_trail_says_so(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "allow", "42": "deny"},
                                        "skill": {"*": "deny", "7": "allow"}}})
    store = layout.store()
    looser_in_pi = resolve(store, "bash", "42")
    assert (looser_in_pi.verdict, looser_in_pi.rule and looser_in_pi.rule.pattern) == ("deny", "42")
    step = next(s for s in looser_in_pi.trail if s["step"] == "pi-reading")
    assert step["kept"] == "ours" and step["pi"] == {"verdict": "allow", "decidedBy": {
        "kind": "rule", "surface": "bash", "pattern": "*", "origin": "global"}}
    stricter_in_pi = resolve(store, "skill", "7")
    assert (stricter_in_pi.verdict, stricter_in_pi.rule and stricter_in_pi.rule.pattern) == ("deny", "*")
    plain = resolve(store, "bash", "ls")
    assert not any(s["step"] == "pi-reading" for s in plain.trail)


def test_directional_members_never_loosen_a_20_7_3_path_deny(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path": {"*": "deny"},
                                        "external_directory": {"*": "ask", "/cache/*": "allow"}}})
    layout.write_project({"permission": {"path_read": {"src/*": "allow"}, "path_write": {"src/*": "allow"}}})
    store = layout.store()
    # A `path` ask: both members allow src/*, but 20.7.3 (no families) denies it by `path`.
    folded = resolve(store, "path", "src/a.ts")
    assert (folded.verdict, folded.rule and folded.rule.pattern) == ("deny", "*")
    # A directional ask exists only for newer children: judged by this node's reading alone.
    member = resolve(store, "path_read", "src/a.ts")
    assert member.verdict == "allow"
    assert resolve(store, "external_directory_read", "/cache/x").verdict == "allow"


def test_pi_trims_a_padded_tool_surface_and_builds_its_input_from_the_name_as_sent() -> None:
    assert facts_as_pi(IntentFacts("bash ", ("rm -rf /",))) == IntentFacts("bash", ("",))
    assert facts_as_pi(IntentFacts(" skill", ("lint",))) == IntentFacts("skill", ("*",))
    assert facts_as_pi(IntentFacts("mcp\t", ("srv:tool",))) == IntentFacts("mcp", ("mcp_status", "mcp"))
    assert facts_as_pi(IntentFacts(" read", ("/x",))) == IntentFacts("read", ())
    assert facts_as_pi(IntentFacts(" read ", ())) == IntentFacts("read", ())
    # As sent: path surfaces, mcp, bash and skill themselves.
    for facts in (IntentFacts("read", ("/x",)), IntentFacts("mcp", ("srv:tool",)),
                  IntentFacts("bash", ("ls", "x")), IntentFacts("skill", ())):
        assert facts_as_pi(facts) == facts
    assert facts_as_pi(IntentFacts("path_read", ("/x",))) is None


def test_a_padded_bash_surface_meets_the_bash_rules_as_pi_reads_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"*": "allow", "bash": "deny"}})
    result = resolve(layout.store(), "bash ", "ls")
    assert result.verdict == "deny"
    assert any(step.get("step") == "pi-reading" for step in result.trail)


def test_a_family_ask_meets_a_wildcard_surface_key_as_pi_reads_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"*": "allow", "*_directory": "deny"}})
    assert resolve(layout.store(), "external_directory", "/x").verdict == "deny"


def test_pi_reader_proto_keys() -> None:
    # Assigning `__proto__` sets a prototype (a string is ignored): no entry; a root `__proto__:`
    # map is where `permission` is found when the root has none.
    read = read_permission_block_as_pi
    assert read("---\npermission:\n  bash:\n    __proto__: deny\n    ls: ask\n---\n") == {
        "bash": {"ls": "ask"}}
    assert read("---\npermission:\n  bash:\n    __proto__: deny\n---\n") is None
    assert read("---\n__proto__:\n  permission:\n    bash: deny\n---\n") == {"bash": "deny"}
    assert read_permission_block_as_pi(
        "---\n__proto__:\n  permission:\n    bash: deny\npermission:\n  read: ask\n---\n") == {"read": "ask"}


def test_pi_reads_bad_utf8_and_rejects_unsafe_integers_as_its_schema_does(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.global_config.parent.mkdir(parents=True)
    layout.global_config.write_bytes(
        b'{"permission": {"*": "allow", "bash": {"rm *": {"action": "deny", "reason": "\xff"}}}}')
    store = layout.store()
    assert store.policy("Explore").errors  # ours refuses the file and says why
    denied = resolve(store, "bash", "rm -rf /")
    assert (denied.verdict, denied.rule and denied.rule.pattern) == ("deny", "rm *")  # pi's reading holds
    assert resolve(store, "bash", "ls").verdict == "ask"  # ours: the global file gives nothing
    layout.write_project({"toolInputPreviewMaxLength": 2**53, "permission": {"bash": "allow"}})
    errors = layout.store().policy("Explore").errors
    assert any("2**53 - 1" in error.reason for error in errors)


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
