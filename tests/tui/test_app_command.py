"""`tui/commands/app_command.py`: the same core as `serve`, the knobs from the pi config."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from core.judging.recorded import RecordedAuthority
from tui.commands import app_command
from tui.commands.node import attended_node


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    app_command.add_app_options(parser)
    return parser.parse_args(list(argv))


def test_bare_invocation_gets_the_app_defaults() -> None:
    filled = app_command.with_defaults(argparse.Namespace(verbose=False))
    assert filled.sessions == [] and filled.forwarding_root is None and filled.links == []
    assert filled.grace_ms is None and filled.no_double_press is False


def test_ui_settings_come_from_the_pi_config(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({
        "doublePressToConfirm": False,
        "forwardingTimeoutMs": 120_000,
        "promptNotifications": ["osc9"],
        "permissionDialogKeys": {"approve": "a"},
    }))
    args = parse("--agent-dir", str(agent), "--project", str(tmp_path / "project"),
                 "--forwarding-root", str(tmp_path / "root"), "--state-dir", str(tmp_path / "state"),
                 "--grace-ms", "250")
    node = attended_node(args)
    core, human, authority = node.core, node.person, node.authority
    assert isinstance(authority, RecordedAuthority) and human.grants is authority and core.arbiter is human
    assert core.judge is authority and node.history is not None
    settings = app_command.ui_settings(args, authority)
    assert settings.double_press is False
    assert settings.prompt_notifications == ("osc9",)
    assert settings.dialog_keys == {"approve": "a"}
    assert settings.input_grace_ms == 250
    assert core.timeout_ms() == 120_000


def test_the_app_needs_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert app_command.run(argparse.Namespace(verbose=False)) == 2
    assert "needs a terminal" in capsys.readouterr().err
