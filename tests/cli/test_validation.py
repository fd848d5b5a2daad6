"""Command-line input a person can get wrong: one line saying what and why, exit 2, no traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tui.cli import main


@pytest.fixture(autouse=True)
def _own_agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never the real ~/.pi: every default path points into the test's own folder."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("pi-authorizer")
    return err


def serving(tmp_path: Path, *extra: str) -> list[str]:
    return ["serve", "--session", "s", "--forwarding-root", str(tmp_path / "root"), "--create",
            "--state-dir", str(tmp_path / "state"), *extra]


@pytest.mark.parametrize("command", ["serve", "run", "app", "explain"])
def test_a_missing_rules_file_is_an_error_not_an_empty_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = tmp_path / "nope.json"
    argv = [command, "--rules", str(missing)]
    if command == "explain":
        argv.append(str(tmp_path / "request.json"))
    err = one_line_error(capsys, argv)
    assert "--rules" in err and "no such file" in err and str(missing) in err


@pytest.mark.parametrize("spec", ["nocommand", "=ls", "name=", "two words=ls"])
def test_a_bad_link_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    err = one_line_error(capsys, serving(tmp_path, "--link", spec))
    assert "--link" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["history", "--limit", "-1"],
        ["app", "--grace-ms", "-5"],
        ["serve", "--link-timeout", "-1"],
        ["history", "--keep-history-rows", "-2"],
        ["serve", "--keep-history", "soon"],
    ],
)
def test_negative_or_malformed_numbers(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    err = one_line_error(capsys, argv)
    assert argv[1] in err


@pytest.mark.parametrize("session", ["..", ".", "", "   ", "unknown"])
@pytest.mark.parametrize("command", ["serve", "history"])
def test_session_ids_that_name_no_inbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], session: str, command: str
) -> None:
    err = one_line_error(capsys, [command, "--state-dir", str(tmp_path / "state"), "--session", session])
    assert "--session" in err
    assert not (tmp_path / "state").exists()


def test_hostile_text_in_an_error_is_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, ["history", "--limit", "\x1b]0;pwn\x07\u202e"])
    assert "\x1b" not in err and "\u202e" not in err and "\x07" not in err


def test_a_forwarding_root_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    root.write_text("not a folder")
    err = one_line_error(capsys, ["serve", "--session", "s", "--forwarding-root", str(root),
                                  "--state-dir", str(tmp_path / "state")])
    assert "forwarding root" in err and str(root) in err


@pytest.mark.parametrize("command", ["serve", "run"])
def test_a_state_dir_that_cannot_be_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = [command, "--session", "s", "--forwarding-root", str(tmp_path / "root"), "--create",
            "--state-dir", str(blocker / "state")]
    err = one_line_error(capsys, argv + (["--", "true"] if command == "run" else []))
    assert "state dir" in err and "cannot create" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a read-only mode")
def test_a_read_only_state_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o500)
    try:
        err = one_line_error(capsys, serving(tmp_path))
    finally:
        state.chmod(0o700)
    assert "state dir" in err and "not writable" in err


def test_a_history_that_cannot_be_opened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "history.sqlite3").write_bytes(b"this is not a database" * 100)
    err = one_line_error(capsys, ["history", "--state-dir", str(state)])
    assert "cannot be opened" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["history", "--verdict", "bogus"], "'bogus' is not a verdict; one of: approved"),
        (["history", "--verdict", "aproved"], "did you mean 'approved'?"),
        (["history", "--verdit", "approved"], "arguments: --verdit approved; did you mean --verdict?"),
        (["hisory"], "unknown command 'hisory'; did you mean 'history'?"),
        (["serve", "--forwarding-rot", "x"], "did you mean --forwarding-root?"),
        (["serve", "--on-ask", "dny"], "did you mean 'deny'?"),
        (["history", "--keep-history", "2d"], "never deletes rows; to delete old ones: history prune"),
        (["history", "prune"], "--older-than DURATION and/or --keep-rows N"),
        (["history", "prune", "--older-then", "2d"], "did you mean --older-than?"),
    ],
)
def test_every_value_is_checked_and_a_typo_gets_a_suggestion(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert said in one_line_error(capsys, argv)


@pytest.mark.parametrize("command", ["serve", "run", "app"])
def test_a_missing_forwarding_root_is_refused_with_the_closest_existing_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    meant = tmp_path / "agent" / "sessions" / "permission-forwarding"
    meant.mkdir(parents=True)
    typo = tmp_path / "agnet" / "sessions" / "permision-forwarding"
    argv = [command, "--session", "s", "--forwarding-root", str(typo), "--state-dir", str(tmp_path / "state")]
    err = one_line_error(capsys, argv + (["--", "true"] if command == "run" else []))
    assert f"--forwarding-root {typo} does not exist; did you mean {meant}? (--create creates it)" in err
    assert not typo.exists() and not (tmp_path / "agnet").exists()
    assert not (tmp_path / "state").exists()  # refused before anything is made


def test_a_missing_forwarding_root_with_no_close_name_names_the_deepest_existing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "agent").mkdir()
    typo = tmp_path / "agent" / "zzz" / "qqq"
    argv = ["serve", "--forwarding-root", str(typo), "--state-dir", str(tmp_path / "s")]
    err = one_line_error(capsys, argv)
    assert f"did you mean {tmp_path / 'agent'}?" in err


def test_a_missing_forwarding_root_is_created_with_create_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "agent" / "sessions" / "permision-forwarding"
    argv = ["run", "--session", "s", "--forwarding-root", str(typo), "--create",
            "--state-dir", str(tmp_path / "state"), "--", "true"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"--forwarding-root {typo} did not exist, so no child wrote there yet (a typo?)" in err
    assert "no pi child writes to" in err  # outside <agentDir>/sessions/permission-forwarding
    assert typo.is_dir() and (typo.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("target", ["session:s", "smtp://x", "nats://nohost"])
def test_a_bad_forward_to_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    err = one_line_error(capsys, serving(tmp_path, "--forward-to", target))
    assert "--forward-to" in err


def test_a_bad_broker_access_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    access = tmp_path / "access.toml"
    access.write_text('user = "u"\n')
    access.chmod(0o644)
    err = one_line_error(capsys, serving(tmp_path, "--broker", "nats://127.0.0.1:1", "--broker-access",
                                         str(access)))
    assert "--broker-access" in err and "others may read it" in err


def test_a_missing_review_log_is_named_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "review.jsonl"
    assert main(["history", "--state-dir", str(tmp_path / "state"), "--import-pi-log", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.count(str(missing)) == 1 and "No such file" in err
