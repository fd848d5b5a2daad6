"""Fixtures for the interop suite: a node able to run the real 20.7.3 package, per-test dirs."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.interop.harness import NODE_DIR, NodeDriver

NPM_CI_TIMEOUT_S = 300


def _npm_ci(npm: str) -> None:
    try:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=NPM_CI_TIMEOUT_S,
            start_new_session=True,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`npm ci` in {NODE_DIR} did not finish within {NPM_CI_TIMEOUT_S}s")
    if done.returncode != 0:
        pytest.fail(f"`npm ci` in {NODE_DIR} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def _installed_matches_pins() -> bool:
    """Every dependency pinned in package.json is installed at exactly that version."""
    pins: dict[str, str] = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    for name, version in pins.items():
        manifest = NODE_DIR / "node_modules" / name / "package.json"
        try:
            if json.loads(manifest.read_text())["version"] != version:
                return False
        except (OSError, ValueError, KeyError):
            return False
    return True


@pytest.fixture(scope="session")
def node_driver() -> NodeDriver:
    """node + the pinned package installed in tests/interop/node (runs `npm ci` once if needed).

    The check and the install hold a lock on package.json: the suite's parallel workers each reach
    this fixture, and only one of them may install while the others wait and then find it done."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: interop tests need node")
    driver = NodeDriver(node=node)
    with (NODE_DIR / "package.json").open("rb") as pins:
        fcntl.flock(pins, fcntl.LOCK_EX)
        if not _installed_matches_pins() or not driver.tsx_cli.is_file():
            npm = shutil.which("npm")
            if npm is None:
                pytest.skip("npm is not installed: interop tests need it to install the node driver")
            _npm_ci(npm)
    return driver


@pytest.fixture
def forwarding_root(tmp_path: Path) -> Path:
    root = tmp_path / "permission-forwarding"
    root.mkdir()
    return root


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    return state


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    return logs
