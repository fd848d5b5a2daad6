"""Differences with the reference found by the differential campaign (issue 11), one case each.

Each case is judged by `explain --json` and by the real 20.7.3 `PermissionManager` over the same
files; both must give the same verdict and winning rule.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from tests.interop.harness import NodeDriver
from tests.interop.reference import GLOBAL, HOME, PROJECT, Case, Verdict, agent_file, reference_verdicts
from tui.commands import explain_command as explain

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("fidelity"), pytest.mark.timeout(120)]


def _config(permission: dict[str, object]) -> dict[str, str]:
    return {GLOBAL: json.dumps({"permission": permission})}


FIXES: dict[str, tuple[Case, str]] = {
    "bash value trimmed": (
        Case(_config({"bash": {"*": "allow", "rm -rf *": "deny"}}), "Explore", "bash", (" rm -rf /",)),
        "deny"),
    "bash comment lines stripped": (
        Case(_config({"bash": {"*": "allow", "rm *": "deny"}}), "Explore", "bash",
             ("# clean up\nrm -rf build",)),
        "deny"),
    "bash all-comment command matched as written": (
        Case(_config({"bash": {"*": "allow", "# *": "deny"}}), "Explore", "bash", ("  # only\n",)),
        "allow"),
    "home pattern ~// joins without restarting at /": (
        Case(_config({"path": {"*": "allow", "~//.ssh/*": "deny"}}), "Explore", "path",
             (f"{HOME}/.ssh/id_rsa",)),
        "deny"),
    "home pattern ~// does not reach /.ssh": (
        Case(_config({"path": {"*": "allow", "~//.ssh/*": "deny"}}), "Explore", "path",
             ("/.ssh/id_rsa",)),
        "allow"),
    "home pattern with a trailing backslash": (
        Case(_config({"read": {"*": "ask", "$HOME/build\\": "deny"}}), "Explore", "read",
             (f"{HOME}/build\\",)),
        "deny"),
    "home pattern ~\\/": (
        Case(_config({"read": {"*": "allow", "~\\/.ssh/*": "deny"}}), "Explore", "read",
             (f"{HOME}/.ssh/config",)),
        "deny"),
    "match values are not home-expanded": (
        Case(_config({"read": {"*": "ask", f"{HOME}/*": "allow"}}), "Explore", "read", ("~/notes.md",)),
        "ask"),
    # Found by the value-first campaign (scripts/fidelity_unseen.py):
    "a knob beyond 2**53 - 1: pi's schema drops the whole file": (
        Case({GLOBAL: json.dumps({"toolInputPreviewMaxLength": 1e20, "permission": {"*": "allow"}})},
             "Explore", "bash", ("ls",)),
        "ask"),
    "invalid UTF-8 in config.json: pi reads U+FFFD, its deny holds": (
        Case({GLOBAL: json.dumps({"permission": {"*": "allow", "bash": {
            "rm *": {"action": "deny", "reason": "bad \udcff byte"}}}}, ensure_ascii=False)},
             "Explore", "bash", ("rm -rf /",)),
        "deny"),
    "invalid UTF-8 in an agent file: its deny holds": (
        Case({**_config({"bash": "allow"}),
              agent_file("Explore"): "---\ndescription: caf\udce9\npermission:\n  bash: deny\n---\n"},
             "Explore", "bash", ("ls",)),
        "deny"),
    "a surface key ~ is home-expanded by pi": (
        Case(_config({"*": "allow", "~": "deny"}), "Explore", HOME, ("x",)), "deny"),
    "a __proto__ pattern in config.json is no rule to pi": (
        Case(_config({"bash": {"*": "deny", "__proto__": "allow"}}), "Explore", "bash", ("__proto__",)),
        "deny"),
    "frontmatter: pi finds permission under a root __proto__ map": (
        Case({**_config({"bash": "allow"}),
              agent_file("Explore"): "---\n__proto__:\n  permission:\n    bash: deny\n---\n"},
             "Explore", "bash", ("ls",)),
        "deny"),
}


def _agent(name: str, frontmatter: str, permission: dict[str, object] | None = None) -> dict[str, str]:
    files = _config(permission or {"bash": "ask"})
    files[agent_file(name)] = frontmatter
    return files


# Documented differences (docs/design/fidelity.md): (case, our verdict, pi's verdict). Where the two
# differ, ours is the stricter; where they agree, the winning rule is pi's too.
DECISIONS: dict[str, tuple[Case, str, str]] = {
    "integer key ordered first, as pi": (
        Case(_config({"bash": {"*": "deny", "42": "allow"}}), "Explore", "bash", ("42",)), "deny", "deny"),
    "integer key ordered first would loosen a deny": (
        Case(_config({"bash": {"*": "allow", "42": "deny"}}), "Explore", "bash", ("42",)), "deny", "allow"),
    "? sees two UTF-16 units, as pi": (
        Case(_config({"skill": {"*": "allow", "a??c": "deny"}}), "Explore", "skill", ("a\U0001f600c",)),
        "deny", "deny"),
    "? on one code point stays a deny": (
        Case(_config({"skill": {"*": "allow", "a?c": "deny"}}), "Explore", "skill", ("a\U0001f600c",)),
        "deny", "allow"),
    "unknown path_* key: the scope's deny stands": (
        Case({GLOBAL: json.dumps({"permission": {"bash": "allow"}}),
              PROJECT: json.dumps({"permission": {"bash": {"rm *": "deny"}, "path_reed": {"x": "deny"}}})},
             "Explore", "bash", ("rm x",)), "deny", "deny"),
    "unknown path_* key: the scope fails closed": (
        Case({GLOBAL: json.dumps({"permission": {"bash": "allow"}}),
              PROJECT: json.dumps({"permission": {"path_reed": {"x": "deny"}}})},
             "Explore", "bash", ("ls",)), "ask", "allow"),
    "agent named unknown: its file's deny applies": (
        Case(_agent("unknown", "---\npermission:\n  bash: deny\n---\n"), "unknown", "bash", ("ls",)),
        "deny", "deny"),
    "agent named unknown: its file's allow does not": (
        Case(_agent("unknown", "---\npermission:\n  bash: allow\n---\n"), "unknown", "bash", ("ls",)),
        "ask", "allow"),
    "tab-indented deny": (
        Case(_agent("Explore", "---\npermission:\n\tbash: deny\n---\n"), "Explore", "bash", ("ls",)),
        "deny", "deny"),
    "ragged indentation": (
        Case(_agent("Explore", "---\npermission:\n  bash:\n      ls: deny\n    rm *: allow\n---\n"),
             "Explore", "bash", ("ls",)), "deny", "deny"),
    "CRLF frontmatter": (
        Case(_agent("Explore", "---\r\npermission:\r\n  bash: deny\r\n---\r\n"), "Explore", "bash",
             ("ls",)), "deny", "deny"),
    "empty nested map leaves the global entry": (
        Case(_agent("Explore", "---\npermission:\n  bash:\n---\n", {"bash": "deny"}), "Explore", "bash",
             ("ls",)), "deny", "deny"),
    "long deny reason in frontmatter": (
        Case(_agent("Explore", "---\npermission:\n  bash:\n    ls:\n      action: deny\n"
                    f"      reason: {'r' * 600}\n---\n"), "Explore", "bash", ("ls",)), "deny", "deny"),
    "--- with a trailing space: pi ignores the file, its deny stands here": (
        Case(_agent("Explore", "--- \npermission:\n  bash: deny\n---\n", {"bash": "allow"}), "Explore",
             "bash", ("ls",)), "deny", "allow"),
    "trailing # comment: pi drops the value, its deny stands here": (
        Case(_agent("Explore", "---\npermission:\n  bash: deny  # no\n---\n", {"bash": "allow"}),
             "Explore", "bash", ("ls",)), "deny", "allow"),
    "bare string and member map in one file": (
        Case(_config({"path": "deny", "path_read": {"src/*": "allow"}}), "Explore", "path", ("src/x",)),
        "deny", "deny"),
    "tool surface judged on * by pi, on its values here too": (
        Case(_config({"task": {"*": "allow", "danger": "deny"}}), "Explore", "task", ("danger",)),
        "deny", "allow"),
    "tool surface deny on *": (
        Case(_config({"task": {"*": "deny", "safe": "allow"}}), "Explore", "task", ("safe",)),
        "deny", "deny"),
    "${HOME} deny (pi 20.7.3 does not expand it)": (
        Case(_config({"read": {"*": "allow", "${HOME}/.ssh/*": "deny"}}), "Explore", "read",
             (f"{HOME}/.ssh/id_rsa",)), "deny", "allow"),
    "__proto__ deny in frontmatter: pi drops it, the deny stands here": (
        Case(_agent("Explore", "---\npermission:\n  bash:\n    __proto__: deny\n---\n", {"bash": "allow"}),
             "Explore", "bash", ("__proto__",)), "deny", "allow"),
    "? against a surface beyond the BMP stays a deny": (
        Case(_config({"*": "allow", "?": "deny"}), "Explore", "\U0001f600", ("x",)), "deny", "allow"),
    "a knob beyond 2**53 - 1 in the project file: pi drops the file, here it fails closed": (
        Case({GLOBAL: json.dumps({"permission": {"*": "allow"}}),
              PROJECT: json.dumps({"toolTextSummaryMaxLength": 2**53 + 2, "permission": {"bash": "deny"}})},
             "Explore", "bash", ("ls",)), "ask", "allow"),
    "an invalid __proto__ entry: pi's schema skips it, here the file fails closed": (
        Case({GLOBAL: '{"permission": {"bash": {"__proto__": 5, "*": "allow"}}}'}, "Explore", "bash",
             ("ls",)), "ask", "allow"),
    "${HOME} allow is not wider than pi": (
        Case(_config({"read": {"*": "ask", "${HOME}/*": "allow"}}), "Explore", "read", (f"{HOME}/x",)),
        "ask", "ask"),
}


def _explain(root: Path, case: Case, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> tuple[Verdict, dict[str, Any]]:
    monkeypatch.setenv("HOME", HOME)
    request = {
        "id": "toolu_01", "createdAt": 1790000000000, "requesterSessionId": "child",
        "targetSessionId": "parent", "requesterAgentName": case.agent, "message": "ask",
        "surface": case.surface, "value": case.values[0],
        "accessIntent": {"surface": case.surface, "matchValues": list(case.values),
                         "boundaryValue": None, "requesterCwd": str(root / "project"),
                         "principal": {"sessionId": "child", "agentName": case.agent}},
    }
    path = root / "request.json"  # the case folder: explain reads it, the reference ignores it
    path.write_text(json.dumps(request))
    parser = argparse.ArgumentParser()
    explain.add_parser(parser.add_subparsers())
    args = parser.parse_args(["explain", str(path), "--agent-dir", str(root / "agent"),
                              "--project", str(root / "project"), "--json"])
    capsys.readouterr()
    assert args.handler(args) == 0
    out = json.loads(capsys.readouterr().out)
    decided = out["decidedBy"] or {}
    evaluate = [s for s in out["trail"] if s.get("step") == "evaluate"][-1]
    winner = evaluate["winner"]
    pattern = winner["pattern"] if winner["layer"] in ("config", "session") else None
    assert decided.get("pattern", pattern) == pattern
    return Verdict(out["verdict"], pattern, winner["origin"]), out


@pytest.fixture(scope="module")
def reference(
    node_driver: NodeDriver, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, Verdict]]:
    """Every case of this module written and judged by the reference in one node run."""
    folder = tmp_path_factory.mktemp("fidelity")
    cases = {name: case for name, (case, _) in FIXES.items()}
    cases.update({name: case for name, (case, _, _) in DECISIONS.items()})
    written = [(case, case.write(folder / f"c{index}")) for index, case in enumerate(cases.values())]
    verdicts = reference_verdicts(node_driver, written)
    return {name: (root, verdict) for name, (_, root), verdict in zip(cases, written, verdicts, strict=True)}


@pytest.mark.parametrize("name", sorted(FIXES))
def test_explain_agrees_with_the_reference(
    name: str, reference: dict[str, tuple[Path, Verdict]], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case, expected = FIXES[name]
    root, theirs = reference[name]
    ours, _ = _explain(root, case, monkeypatch, capsys)
    assert theirs.state == expected, case.reproduction(ours, theirs)
    assert ours == theirs, case.reproduction(ours, theirs)


@pytest.mark.parametrize("name", sorted(DECISIONS))
def test_documented_differences(
    name: str, reference: dict[str, tuple[Path, Verdict]], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case, ours_expected, pi_expected = DECISIONS[name]
    root, theirs = reference[name]
    ours, out = _explain(root, case, monkeypatch, capsys)
    assert (ours.state, theirs.state) == (ours_expected, pi_expected), case.reproduction(ours, theirs)
    if ours.state == theirs.state:
        assert ours == theirs, case.reproduction(ours, theirs)
    else:  # explain says why: pi's reading beside ours, or the config error that made ours stricter
        assert any(s.get("step") == "pi-reading" for s in out["trail"]) or out["configErrors"], out
