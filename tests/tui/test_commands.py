"""The app's commands: `app` (the same core as `serve`, the knobs from the pi config, a terminal
needed) and `python -m tui.screenshots` (every screenshot written, an SVG of its screen)."""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

import pytest

from core.judging.recorded import RecordedAuthority
from tui import screenshots
from tui.commands import app_command
from tui.commands.node import attended_node

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed check

# Rich writes a space in SVG text as `&#160;`; one word per screen is enough to tell them apart.
EXPECTED = {
    "queue.svg": "askingUnits",
    "path-ask.svg": "src/auth/session.ts",
    "no-facts.svg": "CHILD-FIXED",
    "hostile.svg": "PWNED",
    "help.svg": "Deciding",
    "sessions.svg": "019ff96b-2222-7000-8000-bbbbbbbbbbbb",
    "deny-with-reason.svg": "CI&#160;passes",
    "review.svg": "denied_with_reason",
    "grants.svg": "answering",
    "batch-preview.svg": "Exactly&#160;what&#160;will&#160;be&#160;decided",
    "queue-80x24.svg": "…+",
}


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
    core, person, authority = node.core, node.person, node.authority
    assert isinstance(authority, RecordedAuthority) and person.grants is authority and core.arbiter is person
    assert core.judge is authority and node.history is not None
    settings = app_command.ui_settings(args, authority)
    assert settings.double_press is True  # no config file turns it off (issue 34 finding 3)
    assert settings.ignored_knobs == ("global: doublePressToConfirm",)
    assert settings.prompt_notifications == ("osc9",)
    assert settings.dialog_keys == {"approve": "a"} and settings.dialog_keys_from == str(config)
    assert settings.input_grace_ms == 250
    assert core.timeout_ms() == 120_000


def test_a_hostile_project_config_cannot_swap_the_decision_keys(tmp_path: Path) -> None:
    """Issue 20 finding 5: `permissionDialogKeys` approve<->deny and `doublePressToConfirm: false` in the
    child-writable project layer are ignored; the app is told, to say so."""
    agent, project = tmp_path / "agent", tmp_path / "project"
    config = project / ".pi" / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permissionDialogKeys": {"approve": "n", "deny": "y"},
                                  "doublePressToConfirm": False}))
    args = parse("--agent-dir", str(agent), "--project", str(project),
                 "--forwarding-root", str(tmp_path / "root"), "--state-dir", str(tmp_path / "state"))
    settings = app_command.ui_settings(args, attended_node(args).authority)
    assert settings.dialog_keys == {} and settings.double_press is True
    assert settings.ignored_knobs == ("project: doublePressToConfirm", "project: permissionDialogKeys")


def test_a_hostile_project_config_turns_on_no_yolo_and_sets_no_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`yoloMode` and `forwardingTimeoutMs` in the child-writable project layer are ignored by the node
    the app builds (an ask still asks; the child's wait is the default) and reported once in the log."""
    agent, project = tmp_path / "agent", tmp_path / "project"
    config = project / ".pi" / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"yoloMode": True, "forwardingTimeoutMs": 1000}))
    args = parse("--agent-dir", str(agent), "--project", str(project),
                 "--forwarding-root", str(tmp_path / "root"), "--state-dir", str(tmp_path / "state"))
    with caplog.at_level(logging.WARNING):
        node = attended_node(args)
        assert node.authority is not None
        node.authority.report_config()  # again: still one line
    settings = app_command.ui_settings(args, node.authority)
    assert settings.ignored_knobs == ("project: yoloMode", "project: forwardingTimeoutMs")
    assert node.core.timeout_ms() == 600_000
    assert node.authority.store.policy("x").settings.yolo_mode is False
    lines = [r.getMessage() for r in caplog.records if "children can write" in r.getMessage()]
    assert len(lines) == 1 and "yoloMode" in lines[0] and "forwardingTimeoutMs" in lines[0]


def test_the_app_needs_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert app_command.run(argparse.Namespace(verbose=False)) == 2
    assert "needs a terminal" in capsys.readouterr().err


def test_every_screenshot_is_an_svg_of_its_screen(tmp_path: Path) -> None:
    written = screenshots.generate(tmp_path / "out")
    assert [path.name for path in written] == list(screenshots.SHOTS)
    assert set(EXPECTED) == set(screenshots.SHOTS)
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert text.startswith("<svg"), path.name
        assert EXPECTED[path.name] in text, path.name
        assert tempfile.gettempdir() not in text, path.name  # no shot shows where it was made
    assert "median&#160;person&#160;decision" in (tmp_path / "out" / "review.svg").read_text(encoding="utf-8")
