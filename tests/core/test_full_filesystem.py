"""A real size-limited filesystem (issue 21): the forwarding root is a small tmpfs in a private mount
namespace (`unshare -m`, as root), really full; a real `serve` answers it
(`tests/core/full_disk_driver.py`). Skipped, with the reason, where that is not permitted."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import in_private_mounts


def drive(scenario: str, tmp_path: Path) -> dict[str, object]:
    seen: dict[str, object] = in_private_mounts(
        ["-m", "tests.core.full_disk_driver", scenario, str(tmp_path)], 300)
    return seen


def check(seen: dict[str, object], asks: int = 3) -> None:
    tail = seen["log_tail"]
    assert seen["alive_while_full"] is True, tail
    assert seen["quarantined_while_full"] == [], tail
    responses = seen["responses"]
    assert isinstance(responses, dict) and len(responses) == asks, tail
    assert seen["requests_left"] == [], tail  # each answered once and taken out of the inbox
    for body in responses.values():
        assert body["state"] == "denied_with_reason" and body["decidedBy"]["kind"] == "unavailable", body
    assert seen["heartbeat"] is True and seen["alive_after"] is True, tail
    assert seen["returncode"] == 0, tail


def test_serve_answers_every_ask_once_a_filesystem_that_filled_has_space_again(tmp_path: Path) -> None:
    check(drive("fills", tmp_path))


def test_serve_answers_every_ask_that_arrived_while_the_filesystem_filled(tmp_path: Path) -> None:
    """Asks arrive one by one while the disk fills between them: the first are answered at once, the
    rest wait for the disk; `serve` never exits and every child is answered once it has space."""
    seen = drive("fills-while-asking", tmp_path)
    check(seen, asks=12)
    assert seen["full_before_last_ask"] is True, seen["log_tail"]


def test_serve_started_on_a_full_filesystem_keeps_trying_and_answers_once_it_has_space(
    tmp_path: Path,
) -> None:
    check(drive("full-at-start", tmp_path))


def test_serve_with_its_state_dir_on_the_full_filesystem_waits_and_answers_once_it_has_space(
    tmp_path: Path,
) -> None:
    """The history (an existing one) cannot even be opened on the full disk: `serve` waits for it
    instead of exiting, then serves."""
    check(drive("all-full-at-start", tmp_path))
