"""The shape of the house: packages that are the architecture, few loose modules, no class spread over
a chain of modules, no test module importing another, a module long enough to hide two ideas flagged.

ruff, mypy --strict and the import-linter layers of `pyproject.toml` are a step of their own in
`.ci/run` (before the suite), so a failing check names itself and the suite stays fast."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from core.platform import LINUX_ONLY_CALLS, LINUX_ONLY_OS

REPO = Path(__file__).resolve().parents[1]
#: A module this long probably holds more than one idea (an alarm, not a cap: say why with `Size:`).
ALARM_LINES = 600
SHIPPED = sorted(path.relative_to(REPO).as_posix() for package in ("core", "tui")
                 for path in (REPO / package).rglob("*.py"))


def test_importing_core_loads_no_textual() -> None:
    """What the contracts cannot see: a third-party package that core uses pulling Textual or Rich in."""
    code = ("import importlib, pkgutil, sys, core;"
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages(core.__path__, 'core.')];"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'textual', 'tui', 'rich'}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("module", SHIPPED)
def test_a_very_long_module_says_why(module: str) -> None:
    text = (REPO / module).read_text(encoding="utf-8")
    lines = len(text.splitlines())
    docstring = ast.get_docstring(ast.parse(text)) or ""
    reasons = [line for line in docstring.splitlines() if line.strip().startswith("Size:")]
    assert lines <= ALARM_LINES or reasons, f"{module}: {lines} lines and no `Size:` line in its docstring"


def packages() -> list[Path]:
    """Every package of `core/` and `tui/` (a folder with an `__init__.py`), the two roots included."""
    return sorted(init.parent for root in ("core", "tui") for init in (REPO / root).rglob("__init__.py"))


def test_every_package_says_what_it_is() -> None:
    """A package is a room of the map: its `__init__.py` opens with a docstring that says what it holds."""
    silent = [str(package.relative_to(REPO)) for package in packages()
              if not ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))]
    assert silent == []


def test_the_contributing_layout_names_every_package() -> None:
    """CONTRIBUTING.md "Layout" (the contributor's map; the README is for users) names each package of
    `core/` and `tui/` (as `core/serving/`), and nothing else."""
    guide = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    layout = guide.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`((?:core|tui)/(?:[a-z_]+/)*)`", layout))
    shipped = {package.relative_to(REPO).as_posix() + "/" for package in packages()}
    assert sorted(shipped - named) == [], "packages missing from CONTRIBUTING.md Layout"
    assert sorted(named - shipped) == [], "CONTRIBUTING.md Layout names packages that do not exist"


#: The modules at the top of `core/`: what no one package owns (the clock, untrusted text, the seams,
#: the fakes, the person's slot, the wiring, what the operating system offers). Everything else lives
#: in the package of its stage.
LOOSE_CORE = {"clock.py", "text.py", "platform.py", "seams.py", "testing.py", "person.py", "wiring.py"}


def test_core_keeps_few_loose_modules() -> None:
    loose = {path.name for path in (REPO / "core").glob("*.py") if path.name != "__init__.py"}
    assert sorted(loose - LOOSE_CORE) == []


def linux_only_uses(module: str) -> list[str]:
    """Where `module` touches what only Linux has: an `os` name macOS lacks, `ctypes` (libc by name),
    a system call named as a string (`getattr(libc, "syncfs")`), or a `/proc` path."""
    found = []
    for node in ast.walk(ast.parse((REPO / module).read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                and node.attr in LINUX_ONLY_OS):
            found.append(f"os.{node.attr}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]
            found += [f"import {name}" for name in names if name and name.split(".")[0] == "ctypes"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                node.value.startswith("/proc") or node.value in LINUX_ONLY_CALLS):
            found.append(repr(node.value))
        elif isinstance(node, ast.Attribute) and node.attr in LINUX_ONLY_CALLS | {"kqueue"} and not (
                isinstance(node.value, ast.Name) and node.value.id in {"platform", "_KQ"}):
            found.append(f".{node.attr}")
    return [f"{module}:{line}" for line in found]


def test_only_the_platform_module_touches_linux_only_names() -> None:
    """`core/platform.py` says what this OS offers; anything else asks it, so nothing Linux-only is
    touched at import on a Mac and `PI_AUTHORIZER_PORTABLE=1` turns every such capability off."""
    offenders = [use for module in SHIPPED if module != "core/platform.py" for use in linux_only_uses(module)]
    assert offenders == []
    assert linux_only_uses("core/platform.py"), "the check sees nothing: it would pass anything"


def project_classes() -> dict[str, tuple[str, list[str]]]:
    """Every class of `core/` and `tui/` by name: its module and the names of its bases."""
    found: dict[str, tuple[str, list[str]]] = {}
    for module in SHIPPED:
        for node in ast.walk(ast.parse((REPO / module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [base.id if isinstance(base, ast.Name) else base.attr
                         for base in node.bases if isinstance(base, ast.Name | ast.Attribute)]
                found.setdefault(node.name, (module, bases))
    return found


def test_no_class_is_spread_over_a_chain_of_modules() -> None:
    """One class, one module (or a base beside it): a class whose own bases in this project come from
    three or more modules is one idea split across files (compose instead)."""
    classes = project_classes()

    def modules_of(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if name not in classes or name in seen:
            return set()
        module, bases = classes[name]
        return {module}.union(*(modules_of(base, seen | {name}) for base in bases))

    spread = {name: sorted(modules_of(name)) for name in classes if len(modules_of(name)) >= 3}
    assert spread == {}


#: Module names used twice, each time for the same idea seen from another side (the sessions a core
#: serves, and the screen that shows them).
SAME_IDEA_TWICE = {"sessions.py"}


def test_no_module_name_is_reused_for_another_idea() -> None:
    names = [Path(module).name for module in SHIPPED if not module.endswith("__init__.py")]
    reused = {name for name in names if names.count(name) > 1}
    assert sorted(reused - SAME_IDEA_TWICE) == []


def test_no_test_module_imports_another() -> None:
    """Shared fakes live in `core.testing` (shipped) or a subject's `support.py`, never in a test module."""
    offenders = [
        f"{path.relative_to(REPO)}: {node.module}"
        for path in sorted((REPO / "tests").rglob("*.py")) if "node_modules" not in path.parts
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module
        and node.module.rsplit(".", 1)[-1].startswith(("test_", "conftest"))
    ]
    assert offenders == []


# Documents outside this repository, by the names code used to cite them.
OUTSIDE_DOCS = re.compile(
    r"wire-contract|wire contract §|tui-guide|\bADR 0\d{3}|adr-0\d{3}|\.\./shared|contract §\d"
)


def prose(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a module, with their line numbers (what cites documents)."""
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            found.append((body[0].lineno, str(body[0].value.value)))
    return found


def test_code_cites_only_documents_in_the_repo() -> None:
    """A citation a reader cannot open is no citation: comments and docstrings cite `docs/` pages."""
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for folder in ("core", "tui", "tests", "bench", "scripts")
        for path in sorted((REPO / folder).rglob("*.py"))
        if "node_modules" not in path.parts and path != Path(__file__)
        for line, text in prose(path.read_text(encoding="utf-8"))
        if OUTSIDE_DOCS.search(text)
    ]
    assert offenders == []


# What of the serving core the app must not touch: the sessions' records, locks and heartbeats (it
# sees them through `ServingCore.served`, `core.serving.sessions.ServedSessions`, only), and the core's
# judge and ledger (the app is handed the recorded authority and the history by name:
# `core.wiring.AttendedNode`). Forbidden on any object, so an alias of the core cannot hide them.
CORE_INTERNALS = frozenset({"heartbeat", "lock", "roster", "by_id", "by_folder", "tracked", "scan_lock",
                            "judge", "ledger"})
#: Names that are internals only on the core itself (`args.sessions` is a command-line option).
CORE_ONLY = frozenset({"sessions"})


def core_internals_touched(source: str) -> list[tuple[int, str]]:
    """Each `x.<internal>` in `source`, and `core.sessions` / `<...>.core.sessions`, with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        on_core = (isinstance(owner, ast.Name) and owner.id == "core") or (
            isinstance(owner, ast.Attribute) and owner.attr == "core")
        if node.attr in CORE_INTERNALS or (node.attr in CORE_ONLY and on_core):
            found.append((node.lineno, node.attr))
    return sorted(found)


def test_the_internals_check_sees_each_way_in() -> None:
    source = ("for s in self.core.sessions.values():\n    s.heartbeat.clear(); s.lock.release()\n"
              "n = len(core.sessions) + len(app.core.roster.by_id)\nok = args.sessions\n"
              "c = self.core\nstore, judge = c.ledger, c.judge\n")
    assert core_internals_touched(source) == [
        (1, "sessions"), (2, "heartbeat"), (2, "lock"), (3, "by_id"), (3, "roster"), (3, "sessions"),
        (6, "judge"), (6, "ledger")]


def test_the_app_never_reaches_into_core_internals() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line} .{attr}"
        for path in sorted((REPO / "tui").rglob("*.py"))
        for line, attr in core_internals_touched(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
