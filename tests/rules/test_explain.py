"""The `explain` command and the core explanation it prints."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from tests.rules.support import Layout
from tui.commands import explain_command as explain


def request(intent: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "toolu_01", "createdAt": 1790000000000, "requesterSessionId": "child",
        "targetSessionId": "parent", "requesterAgentName": "Explore",
        "message": "Agent 'Explore' requested bash command 'git push origin main'.",
        "surface": "bash", "value": "git push origin main", **extra,
    }
    if intent is not None:
        body["accessIntent"] = intent
    return body


def bash_intent(command: str, **extra: Any) -> dict[str, Any]:
    return {"surface": "bash", "matchValues": [command], "boundaryValue": None,
            "requesterCwd": "/worktree/issue-42",
            "principal": {"sessionId": "child", "agentName": "Explore"}, **extra}


def run(layout: Layout, path: Path, *options: str) -> int:
    parser = argparse.ArgumentParser()
    explain.add_parser(parser.add_subparsers())
    args = parser.parse_args(["explain", str(path), "--agent-dir", str(layout.agent_dir),
                              "--project", str(layout.project), *options])
    code: int = args.handler(args)
    return code


def write(tmp_path: Path, content: dict[str, Any] | str) -> Path:
    path = tmp_path / "req.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_json_output_for_a_rule_deny(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"git *": "allow", "git push *": "deny"}}})
    path = write(tmp_path, request(bash_intent("git push origin main")))
    assert run(layout, path, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "deny"
    assert out["decidedBy"] == {"kind": "rule", "surface": "bash", "pattern": "git push *",
                                "origin": "global"}
    assert out["configErrors"] == []
    assert [s["step"] for s in out["trail"]] == ["policy", "evaluate", "verdict"]


def test_text_output_and_config_errors_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": "allow"}})
    project = layout.write_project({"permisson": {}})
    path = write(tmp_path, request(bash_intent("ls")))
    assert run(layout, path) == 0
    captured = capsys.readouterr()
    assert f"config error: {project}: permisson: Unrecognized config key" in captured.err
    assert "fail-closed" in captured.out
    assert "verdict: ask" in captured.out


def test_rules_file_and_json_config_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(tmp_path)
    rules = layout.write(tmp_path / "mine.json", {"permission": {"bash": {"ls": "allow"}}})
    layout.write_agent("Explore", "permission:\n  bash: sometimes\n")
    path = write(tmp_path, request(bash_intent("ls")))
    assert run(layout, path, "--json", "--rules", str(rules)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "ask"  # the broken agent file floors the authorizer's allow
    assert out["configErrors"][0]["key"] == "permission.bash"


def test_no_facts_asks_even_when_the_display_value_matches_an_allow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"git *": "allow"}}})
    path = write(tmp_path, request(None))
    assert run(layout, path, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["verdict"], out["decidedBy"], out["trail"][0]["step"]) == ("ask", None, "no-facts")


@pytest.mark.parametrize("content", ["{ nope", json.dumps({"id": "x"})])
def test_unusable_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    layout = Layout(tmp_path)
    assert run(layout, write(tmp_path, content)) == 2
    assert "not a usable request" in capsys.readouterr().err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(Layout(tmp_path), tmp_path / "absent.json") == 2
    assert "cannot read" in capsys.readouterr().err


def test_path_intent_with_units_and_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"*": "allow"}}})
    intent = bash_intent("sudo ls && rm x", askingUnits=[
        {"command": "sudo ls", "floor": "<indirection-bash-wrapper>"}, {"command": "rm x"}])
    assert run(layout, write(tmp_path, request(intent))) == 0
    out = capsys.readouterr().out
    assert "child floor <indirection-bash-wrapper>: allow -> ask" in out
    assert "asking units:" in out and "verdict: ask" in out
