"""The suite enforces the style gate: ruff clean and mypy --strict clean, and core/ free of Textual."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "command",
    [[sys.executable, "-m", "ruff", "check", "."], [sys.executable, "-m", "mypy"]],
    ids=["ruff", "mypy-strict"],
)
def test_static_check_is_clean(command: list[str]) -> None:
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=280, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_core_never_imports_the_ui() -> None:
    offenders: list[str] = []
    for path in sorted((REPO / "core").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(REPO)}: {n}" for n in names
                          if n.split(".")[0] in {"textual", "tui", "rich"}]
    assert offenders == []


def test_importing_core_loads_no_textual() -> None:
    code = ("import sys, core.serving, core.human, core.wire, core.inbox, core.survey;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'textual', 'tui', 'rich'}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "[]"
