"""Differences with the reference found by the differential campaign (issue 11), one case each.

Each case is judged by `explain --json` and by the real 20.7.3 `PermissionManager` over the same
files; both must give the same verdict and winning rule.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.interop.harness import NodeDriver
from tests.interop.reference import GLOBAL, HOME, Case, Verdict, reference_verdicts
from tui.commands import explain

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


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
}


def _explain(root: Path, case: Case, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> Verdict:
    monkeypatch.setenv("HOME", HOME)
    request = {
        "id": "toolu_01", "createdAt": 1790000000000, "requesterSessionId": "child",
        "targetSessionId": "parent", "requesterAgentName": case.agent, "message": "ask",
        "surface": case.surface, "value": case.values[0],
        "accessIntent": {"surface": case.surface, "matchValues": list(case.values),
                         "boundaryValue": None, "requesterCwd": str(root / "project"),
                         "principal": {"sessionId": "child", "agentName": case.agent}},
    }
    path = root / "request.json"
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
    return Verdict(out["verdict"], pattern, winner["origin"])


@pytest.mark.parametrize("name", sorted(FIXES))
def test_explain_agrees_with_the_reference(
    name: str, node_driver: NodeDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case, expected = FIXES[name]
    root = case.write(tmp_path / "case")
    (theirs,) = reference_verdicts(node_driver, [(case, root)])
    ours = _explain(root, case, monkeypatch, capsys)
    assert theirs.state == expected, case.reproduction(ours, theirs)
    assert ours == theirs, case.reproduction(ours, theirs)
