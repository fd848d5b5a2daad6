"""`pi-authorizer history`: an escaped table or JSON Lines, filtered; pi's review log imported; the
serving options that set the history's retention."""

from __future__ import annotations

import argparse
import io
import json
import time
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.history import HistoryStore, Retention
from core.history.rows import COLUMNS
from core.history.store import HISTORY_FILE
from tui.cli import main
from tui.commands import arguments
from tui.commands import history_command as history
from tui.commands.node import open_history
from tui.commands.options import add_serving_options

HOSTILE = "git status\x1b[2J\u202eevil\u200b [bold]x[/]"


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    history.add_parser(parser.add_subparsers())
    args = parser.parse_args(["history", *argv])
    code: int = args.handler(args)
    return code


@pytest.fixture
def state(tmp_path: Path) -> Path:
    store = HistoryStore(tmp_path / HISTORY_FILE)
    now = time.time()
    store.insert_rows(
        [
            {
                "served_session": "s",
                "request_name": "a.json",
                "request_id": "a",
                "arrived_at": now - 7200,
                "agent": "Explore",
                "surface": "bash",
                "value": "ls",
                "verdict": "approved",
                "outcome": "rule",
                "decider": "rule bash 'ls' (global)",
                "decide_ms": 1.2,
                "raw": b"\xff\x00raw",
            },
            {
                "served_session": "s",
                "request_name": "b.json",
                "request_id": "b",
                "arrived_at": now - 60,
                "agent": "Evil\u202e",
                "surface": "bash",
                "value": HOSTILE,
                "verdict": "denied",
                "outcome": "user",
                "decider": "person (dialog)",
                "decide_ms": 4200.0,
                "facts": '{"accessIntent": null}',
            },
        ]
    )
    store.close()
    return tmp_path


def test_table_escapes_child_text(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--state-dir", str(state)) == 0
    lines = capsys.readouterr().out.splitlines()
    header = ["TIME", "AGENT", "SURFACE", "VALUE", "VERDICT", "BY", "DECIDED", "IN", "REASON"]
    assert lines[0].split() == header
    assert "ls" in lines[2] and "0.001s" in lines[2]  # newest first, as the app lists; seconds only
    assert "\\u001b[2J" in lines[1] and "\\u202eevil\\u200b" in lines[1] and "Evil\\u202e" in lines[1]
    assert "4.200s" in lines[1] and "\\u200b …+10" in lines[1]  # shortened, saying how much is hidden
    hidden = [c for c in "".join(lines) if unicodedata.category(c) in {"Cc", "Cf"}]
    assert hidden == []


def test_json_lines_carry_every_stored_field(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--state-dir", str(state), "--json") == 0
    second, first = (json.loads(line) for line in capsys.readouterr().out.splitlines())  # newest first
    assert tuple(first) == COLUMNS
    assert first["raw"] == "/wByYXc=" and second["value"] == HOSTILE
    assert second["facts"] == {"accessIntent": None}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--since", "1h"], ["b"]),
        (["--verdict", "approved"], ["a"]),
        (["--agent", "Explore"], ["a"]),
        (["--session", "s", "--limit", "1"], ["b"]),
        (["--verdict", "withdrawn"], []),
    ],
)
def test_filters(
    state: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: list[str]
) -> None:
    assert run("--state-dir", str(state), "--json", *argv) == 0
    assert [json.loads(line)["request_id"] for line in capsys.readouterr().out.splitlines()] == expected


def test_durations() -> None:
    assert arguments.duration_arg("1h30m") == 5400 and arguments.duration_arg("90") == 90
    with pytest.raises(argparse.ArgumentTypeError):
        arguments.duration_arg("soon")


def test_no_history_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--state-dir", str(tmp_path)) == 0
    assert "no history yet" in capsys.readouterr().err and not (tmp_path / HISTORY_FILE).exists()


def test_pi_review_log_import_tolerates_garbage_and_is_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "review.jsonl"

    now = time.time()  # one instant: two reads of the clock under load are milliseconds apart

    def at(seconds_ago: float) -> str:
        return datetime.fromtimestamp(now - seconds_ago, UTC).isoformat().replace("+00:00", "Z")

    records = [
        {"timestamp": at(100), "event": "permission_request.waiting", "requestId": "p1"},
        {
            "timestamp": at(96.5),
            "event": "permission_request.approved",
            "requestId": "p1",
            "agentName": "Explore",
            "command": "npm test",
            "resolution": "approved",
            "stream": "review",
        },
        {
            "timestamp": at(50),
            "event": "forwarded_permission.denied",
            "requestId": "p2",
            "toolName": "read",
            "path": "/etc/shadow",
            "resolution": "denied_with_reason",
            "denialReason": "no",
        },
        {"timestamp": at(40), "event": "permission_request.auto_approved"},
        {"timestamp": at(400 * 86400), "event": "permission_request.approved", "requestId": "ancient"},
    ]
    garbage = [
        b"not json",
        b"\xff\xfe",
        b"[1,2]",
        b'{"event": "permission_request.denied"}',
        b'{"timestamp": 5}',
    ]
    log.write_bytes(b"\n".join([*(json.dumps(r).encode() for r in records), *garbage, b'{"cut": ']))
    state = tmp_path / "state"
    assert run("--state-dir", str(state), "--import-pi-log", str(log), "--json") == 0
    out = capsys.readouterr()
    assert "imported 2 decisions" in out.err and "1 past retention, 6 unreadable lines skipped" in out.err
    second, first = (json.loads(line) for line in out.out.splitlines())  # newest first
    assert (first["source"], first["outcome"], first["verdict"], first["surface"], first["value"]) == (
        "pi-review-log",
        "user",
        "approved",
        "bash",
        "npm test",
    )
    assert (
        first["decide_ms"] == pytest.approx(3500.0, abs=1) and first["decider"] == "person (pi's own dialog)"
    )
    assert (second["verdict"], second["reason"], second["value"]) == (
        "denied_with_reason",
        "no",
        "/etc/shadow",
    )
    assert run("--state-dir", str(state), "--import-pi-log", str(log)) == 0
    assert "imported 0 decisions from pi's review log (2 already there" in capsys.readouterr().err


def test_retention_from_the_command_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    old = {"served_session": "s", "request_name": "old.json", "arrived_at": time.time() - 3 * 86400,
           "outcome": "rule"}
    new = {**old, "request_name": "new.json", "arrived_at": time.time()}
    HistoryStore.in_state_dir(state).insert_rows([old, new])
    parser = argparse.ArgumentParser()
    add_serving_options(parser)
    args = parser.parse_args(["--state-dir", str(state), "--keep-history", "2d", "--keep-history-rows", "10"])
    store = open_history(args)
    assert store is not None
    assert store.retention.max_age_s == 2 * 86400 and store.retention.max_rows == 10
    assert [r.request_name for r in store.query()] == ["new.json"]
    forever = open_history(
        parser.parse_args(["--state-dir", str(state), "--keep-history", "0", "--keep-history-rows", "0"])
    )
    assert forever is not None and (forever.retention.max_age_s, forever.retention.max_rows) == (None, None)


def stored(state: Path) -> list[str]:
    store = HistoryStore(state / HISTORY_FILE, Retention(None, None))
    try:
        return sorted(r.request_name for r in store.query())
    finally:
        store.close()


@pytest.fixture
def aged(tmp_path: Path) -> Path:
    """26 rows, 25 of them older than the default retention (180 days)."""
    rows: list[dict[str, object]] = [
        {"served_session": "s", "request_name": f"old{n}.json", "arrived_at": time.time() - 400 * 86400 - n,
         "outcome": "rule", "verdict": "denied_with_reason", "reason": "not on this machine"}
        for n in range(25)
    ]
    rows.append({"served_session": "s", "request_name": "new.json", "arrived_at": time.time(),
                 "outcome": "rule"})
    store = HistoryStore(tmp_path / HISTORY_FILE, Retention(None, None))
    store.insert_rows(rows)
    store.close()
    return tmp_path


def test_listing_never_deletes_rows(aged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--state-dir", str(aged), "--limit", "0") == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 27 and "not on this machine" in out[-1]  # the denial's reason has a column
    assert len(stored(aged)) == 26
    log = aged / "review.jsonl"
    log.write_text("")
    assert run("--state-dir", str(aged), "--import-pi-log", str(log)) == 0  # importing neither
    assert len(stored(aged)) == 26


def test_prune_asks_then_says_what_it_dropped(
    aged: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["history", "--state-dir", str(aged), "prune", "--older-than", "30d"]) == 1
    out = capsys.readouterr().out
    assert "Delete 25 of 26 history rows (older than 30d)? [y/N]" in out and "nothing deleted" in out
    assert len(stored(aged)) == 26
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert main(["history", "prune", "--state-dir", str(aged), "--older-than", "30d"]) == 0
    assert "deleted 25 of 26 history rows (older than 30d); 1 kept" in capsys.readouterr().out
    assert stored(aged) == ["new.json"]
    assert main(["history", "prune", "--state-dir", str(aged), "--keep-rows", "5", "-y"]) == 0
    assert "nothing to prune" in capsys.readouterr().out


def test_prune_without_a_terminal_needs_yes(aged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "prune", "--state-dir", str(aged), "--keep-rows", "1"]) == 2
    assert "would delete 25 of 26 rows; confirm with -y" in capsys.readouterr().err
    assert main(["history", "prune", "--state-dir", str(aged), "--keep-rows", "1", "-y"]) == 0
    assert stored(aged) == ["new.json"]
