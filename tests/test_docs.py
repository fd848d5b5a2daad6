"""The documents a reader opens: the README and the guide are for users (short, plain, every command
and option they name exists), the design notes are for contributors, and no link points nowhere."""

from __future__ import annotations

import argparse
import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tui.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
GUIDE = sorted((REPO / "docs" / "guide").glob("*.md"))
#: What a user reads: the README and the guide.
USER_PAGES = [README, *GUIDE]
#: Every Markdown page of the repository's own (not the packages under node_modules).
PAGES = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
#: Pages another branch writes, linked before they land (empty once merged).
PENDING = {"docs/guide/remote.md"}
#: Options of other programs a user page shows (uv's), not pi-authorizer's.
OTHER_TOOLS_OPTIONS = {"--compile-bytecode"}


def text(page: Path) -> str:
    """The page without its HTML comments (notes to maintainers, never shown)."""
    return re.sub(r"<!--.*?-->", "", page.read_text(encoding="utf-8"), flags=re.S)


def name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def test_the_readme_is_for_a_first_day() -> None:
    readme = text(README)
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150
    for line in ("uv run pi-authorizer demo", "uv run pytest", "python3 -m pip install uv"):
        assert line in readme
    for contributor_word in ("ADR", "matchValues", "version-skew", "chain link", "## Layout",
                             "guarantee", "docs/design/architecture"):
        assert contributor_word not in readme, contributor_word


def test_the_readme_says_what_pi_20_7_3_allows_first() -> None:
    """The fact a user of today's registry needs before any step: with 20.7.3 every ask comes to them."""
    section = text(README).split("## With your pi", 1)[1].split("\n## ", 1)[0]
    first = section.strip().split("\n\n", 1)[0]
    for word in ("20.7.3", "rules", "`w`", "`R`", "`explain`", "links", "suggestions",
                 "every ask comes to you"):
        assert word in first, word


@cache
def shipped_class_names() -> frozenset[str]:
    """The classes of `core/` and `tui/` whose names are code, not words (two capitals at least)."""
    found = set()
    for path in [*(REPO / "core").rglob("*.py"), *(REPO / "tui").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and sum(c.isupper() for c in node.name) >= 2:
                found.add(node.name)
    return frozenset(found)


@pytest.mark.parametrize("page", USER_PAGES, ids=name)
def test_a_user_page_speaks_plainly(page: Path) -> None:
    """No issue numbers, no class or module names: a user page says what a person sees and does."""
    body = text(page)
    assert not re.findall(r"\bissues? \d+|\(#\d+\)|\bfinding \d+", body, flags=re.I)
    assert not re.findall(r"`(?:core|tui)[./][\w./]*`", body)
    classes = set(re.findall(r"\b[A-Z][A-Za-z]+\b", body)) & shipped_class_names()
    assert classes == set()


def parser_words() -> tuple[set[str], set[str]]:
    """Every command and every option the `pi-authorizer` command line accepts."""
    parser = build_parser()
    options = set(parser._option_string_actions)
    commands: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                commands.add(command.replace("history-prune", "history prune"))
                options |= set(sub._option_string_actions)
    return commands, options


@pytest.mark.parametrize("page", USER_PAGES, ids=name)
def test_every_command_and_option_a_user_page_names_exists(page: Path) -> None:
    body = text(page)
    commands, options = parser_words()
    named_options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", body)) - OTHER_TOOLS_OPTIONS
    assert sorted(named_options - options) == []
    code = " ".join(re.findall(r"```.*?```|`[^`\n]+`", body, flags=re.S))
    named_commands = {
        "history prune" if rest.startswith("history prune") else rest.split()[0]
        for rest in re.findall(r"pi-authorizer(?: -v)? ([a-z][a-z -]*)", code)
    }
    assert sorted(named_commands - commands) == []


def links(page: Path) -> list[str]:
    """The relative targets of a page's Markdown links and images."""
    return [target for target in re.findall(r"\]\(([^)\s]+)\)", text(page))
            if not re.match(r"[a-z]+:", target)]


def anchors(page: Path) -> set[str]:
    """The heading anchors a Markdown renderer gives a page (GitHub's rule)."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text(page), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_link_leads_somewhere(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            if resolved.relative_to(REPO).as_posix() not in PENDING:
                broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert broken == []
