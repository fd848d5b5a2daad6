"""What the headless commands print: readable, one time unit, child text never raw on the terminal."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from core.history import HistoryStore
from tui.cli import main

HOSTILE_VALUE = "rm -rf /\x1b[2J\x1b]0;owned\x07 \u202eexe.txt"
HOSTILE_AGENT = "Exp\u202elore\u200b"


@pytest.fixture(autouse=True)
def _own_agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))


def request_file(tmp_path: Path, value: str = HOSTILE_VALUE, agent: str = HOSTILE_AGENT) -> Path:
    body = {
        "id": "r1", "createdAt": 1_700_000_000_000, "requesterSessionId": "c", "targetSessionId": "p",
        "requesterAgentName": agent, "message": f"run {value}?", "surface": "bash", "value": value,
        "accessIntent": {"surface": "bash", "matchValues": [value], "boundaryValue": None,
                         "requesterCwd": "/w", "principal": {"sessionId": "c", "agentName": agent}},
    }
    path = tmp_path / "r1.json"
    path.write_text(json.dumps(body))
    return path


def rules_file(tmp_path: Path, rules: dict[str, object]) -> Path:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"permission": rules}))
    return path


def invisible(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in {"Cc", "Cf"} and c != "\n"]


def test_explain_prints_child_text_as_visible_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(request_file(tmp_path)), "--project", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert invisible(out) == []
    assert "␛[2J" in out and "⟨U+202E RLO⟩" in out and "⟨U+200B ZWSP⟩" in out
    assert "verdict: ask" in out


def test_explain_reads_as_text_not_a_python_dict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = rules_file(tmp_path, {"bash": {"git status": "allow"}})
    request = request_file(tmp_path, value="git status", agent="Explore")
    assert main(["explain", str(request), "--project", str(tmp_path), "--rules", str(rules)]) == 0
    out = capsys.readouterr().out
    assert "{'" not in out and "'kind'" not in out
    assert "request r1 from agent Explore" in out
    assert "verdict: allow, decided by rule bash 'git status' [authorizer]" in out


def test_explain_json_is_ascii(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(request_file(tmp_path)), "--project", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.isascii()
    evaluated = json.loads(out)["trail"][1]
    assert [entry["value"] for entry in evaluated["consulted"]] == [HOSTILE_VALUE]


def test_history_json_uses_milliseconds_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    store = HistoryStore.in_state_dir(state)
    arrived = 1_700_000_010.0
    store.insert_rows([{
        "served_session": "s", "request_name": "r1.json", "request_id": "r1", "agent": "a",
        "created_at": 1_700_000_009_500.0, "arrived_at": arrived, "shown_at": arrived + 1,
        "decided_at": arrived + 3, "ended_at": arrived + 3.25, "decide_ms": 2000.0, "outcome": "user",
        "verdict": "approved",
    }])
    store.close()
    assert main(["history", "--state-dir", str(state), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["created_at"] == 1_700_000_009_500
    assert row["arrived_at"] == 1_700_000_010_000
    assert row["shown_at"] - row["arrived_at"] == 1000
    assert row["decided_at"] - row["shown_at"] == row["decide_ms"] == 2000
    assert row["ended_at"] == 1_700_000_013_250
