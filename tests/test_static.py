"""The suite enforces the style gate: ruff clean, mypy --strict clean, and the layers of `pyproject.toml`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "."],
        [sys.executable, "-m", "mypy"],
        # The import-linter contracts: core never imports tui, Textual or Rich; the rules never reach
        # serving; the app is layered (cli → commands → app → screens → widgets).
        [LINT_IMPORTS, "--no-cache"],
    ],
    ids=["ruff", "mypy-strict", "import-linter"],
)
def test_static_check_is_clean(command: list[str]) -> None:
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=280, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_importing_core_loads_no_textual() -> None:
    """What the contracts cannot see: a third-party package that core uses pulling Textual or Rich in."""
    code = ("import importlib, pkgutil, sys, core;"
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages(core.__path__, 'core.')];"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'textual', 'tui', 'rich'}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "[]"
