"""The installed tool: the wheel holds one `pi_authorizer` package (no top-level `core` or `tui` in
site-packages), every module of it imports under that name alone, and its command answers `--version`.

The wheel is built by the real build backend with the project's own hook (`scripts/wheel_layout.py`),
into a temporary folder; nothing is installed into this environment. One test installs it into a
clean venv with uv (offline, from uv's cache, which `uv sync` filled) and runs its command from
outside the checkout, as `uv tool install .` would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hatchling.builders.wheel import WheelBuilder

from tui.cli import version

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.xdist_group("wheel")
UV = shutil.which("uv")
#: The environment at collection, before each test gets its own `HOME`: uv's cache is found through it.
ENV_AT_IMPORT = dict(os.environ)


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


@pytest.mark.skipif(UV is None, reason="uv is not installed")
def test_the_wheel_installs_into_a_clean_venv_and_runs_from_anywhere(wheel: Path, tmp_path: Path) -> None:
    """Why ~3 s: a venv made and the wheel installed with its dependencies. Offline, so the locked
    versions are installed by their URLs (a `pylock.toml` exported from `uv.lock`), whose wheels
    `uv sync --locked` left in uv's cache; then the wheel itself, and a check that nothing is missing."""
    assert UV is not None
    cache = subprocess.run([UV, "cache", "dir"], env=ENV_AT_IMPORT, capture_output=True, text=True,
                           check=True, timeout=60).stdout.strip()
    env = {**os.environ, "UV_CACHE_DIR": cache, "UV_OFFLINE": "1", "VIRTUAL_ENV": "", "PYTHONPATH": ""}
    venv, lock = tmp_path / "venv", tmp_path / "pylock.toml"
    python = ["--quiet", "--python", str(venv / "bin" / "python")]
    for command, where in (
        ([UV, "export", "--quiet", "--locked", "--no-dev", "--no-emit-project", "--format", "pylock.toml",
          "--output-file", str(lock)], REPO),
        ([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], tmp_path),
        ([UV, "pip", "install", *python, "-r", str(lock)], tmp_path),
        ([UV, "pip", "install", *python, "--no-deps", str(wheel)], tmp_path),
        ([UV, "pip", "check", *python], tmp_path),
    ):
        made = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=300,
                              check=False)
        assert made.returncode == 0, f"{command}: {made.stderr}"
    tool = venv / "bin" / "pi-authorizer"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(tool), *args], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=120, check=False)

    said = run("--version")
    assert said.returncode == 0 and said.stdout.strip() == f"pi-authorizer {version()}", said.stderr
    request = elsewhere / "ask.json"
    request.write_text(json.dumps({"id": "a1", "createdAt": 1.0, "requesterSessionId": "child",
                                   "targetSessionId": "parent", "requesterAgentName": "main",
                                   "message": "run ls?", "surface": "bash", "value": "ls"}))
    explained = run("explain", str(request), "--json", "--agent-dir", str(elsewhere),
                    "--project", str(elsewhere))
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["verdict"] == "ask"  # no facts: live authority decides
