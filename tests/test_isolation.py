"""No test can reach the real home, the real `~/.pi` or another test's files (see `tests/conftest.py`)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from core.disk.paths import agent_dir, default_forwarding_root, default_state_dir

REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)
REPO = Path(__file__).resolve().parents[1]


def test_every_default_location_is_inside_this_tests_home(private_home: Path) -> None:
    assert private_home != REAL_HOME and not private_home.is_relative_to(REAL_HOME)
    for where in (Path.home(), Path("~").expanduser(), agent_dir(), default_forwarding_root(),
                  default_state_dir()):
        assert where.is_relative_to(private_home), where


def test_a_command_run_as_a_child_sees_the_same_home(private_home: Path) -> None:
    code = ("from core.disk.paths import agent_dir, default_state_dir;"
            "print(agent_dir()); print(default_state_dir())")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out and all(Path(line).is_relative_to(private_home) for line in out), out


@pytest.mark.parametrize("turn", ["first", "second"])
def test_each_test_gets_a_fresh_home(turn: str, private_home: Path) -> None:
    # Whichever runs second would see the first one's file if the home were shared.
    assert list(private_home.iterdir()) == []
    (private_home / f"{turn}.txt").write_text(turn)
