"""The installed tool: the wheel holds one `pi_authorizer` package (no top-level `core` or `tui` in
site-packages), every module of it imports under that name alone, and its command answers `--version`.

The wheel is built by the real build backend with the project's own hook (`scripts/wheel_layout.py`),
into a temporary folder; nothing is installed into this environment."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hatchling.builders.wheel import WheelBuilder

from tui.cli import version

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.xdist_group("wheel")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    return Path(next(iter(WheelBuilder(str(REPO)).build(directory=str(out), versions=["standard"]))))


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(folder)
    return folder


def test_the_wheel_claims_one_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n) for n in names if n.endswith(".dist-info/entry_points.txt"))
    tops = {name.split("/", 1)[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"pi_authorizer"}
    assert b"pi-authorizer = pi_authorizer.tui.entry:main" in entry_points
    shipped = {p.relative_to(REPO).as_posix() for root in ("core", "tui") for p in (REPO / root).rglob("*")
               if p.suffix in {".py", ".tcss"} and "__pycache__" not in p.parts}
    assert {f"pi_authorizer/{path}" for path in shipped} <= set(names)


def run_in(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter that finds `pi_authorizer` in `site` first, run outside the checkout."""
    prelude = f"import sys; sys.path.insert(0, {str(site)!r});"
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=site, capture_output=True, text=True,
                          timeout=120, check=False)


def test_every_module_of_the_wheel_imports_under_its_one_name(unpacked: Path) -> None:
    result = run_in(unpacked, (
        "import importlib, pkgutil, pi_authorizer;"
        f"assert pi_authorizer.__file__.startswith({str(unpacked)!r}), pi_authorizer.__file__;"
        "names = [m.name for m in pkgutil.walk_packages(pi_authorizer.__path__, 'pi_authorizer.')];"
        "[importlib.import_module(name) for name in names];"
        "print(len(names), sorted(m for m in sys.modules if m.split('.')[0] in {'core', 'tui'}))"
    ))
    assert result.returncode == 0, result.stderr
    count, leaked = result.stdout.split(" ", 1)
    assert int(count) > 100 and leaked.strip() == "[]"


def test_the_installed_command_says_its_version(unpacked: Path) -> None:
    result = run_in(unpacked, "from pi_authorizer.tui.cli import main; sys.exit(main(['--version']))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"pi-authorizer {version()}"
    assert version() not in {"", "(not installed)"}
