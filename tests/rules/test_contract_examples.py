"""The reference's worked examples of rule semantics, against real config files (win32 halves skipped).

The rules they exercise: `docs/design/contract.md` § Rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from core.rules import AskingUnit, render_trail
from tests.rules.support import Layout, resolve


@dataclass(frozen=True)
class Case:
    name: str
    permission: dict[str, Any]
    surface: str
    values: tuple[str, ...]
    verdict: str
    pattern: str | None = "<unchecked>"
    origin: str | None = None
    floor: str | None = None
    units: tuple[AskingUnit, ...] | None = None
    knobs: dict[str, Any] = field(default_factory=dict)


B1 = {"bash": {"*": "ask", "git *": "ask", "git status": "allow"}}
P7 = {"path": {"*": "allow", "*.env": "deny", "*.env.*": "deny", "*.env.example": "allow"}}
ALIASES = ("/proj/src/foo.ts", "src/foo.ts")
S19 = {"bash": {"*": "ask", "ls*": "allow"}}
UNITS19 = (AskingUnit("ls"), AskingUnit("rm -rf /tmp/x"))
S22 = {"*": "allow", "external_directory": {"*": "ask"},
       "external_directory_read": {"/dev-root/*": "allow"}}
E23 = {"external_directory": {"*": "ask", "~/.cargo/registry/*": "allow"}}
WRAPPER = "<indirection-bash-wrapper>"

CASES = [
    Case("1 exact allow", B1, "bash", ("git status",), "allow", "git status", "global"),
    Case("1 longer command", B1, "bash", ("git status --short",), "ask", origin="global"),
    Case("1 bare git", B1, "bash", ("git",), "ask"),
    Case("2 later deny", {"bash": {"git *": "allow", "git push *": "deny"}}, "bash",
         ("git push origin main",), "deny", "git push *"),
    Case("3 later allow", {"bash": {"*": "deny", "git status": "allow"}}, "bash",
         ("git status",), "allow", "git status"),
    Case("4 universal bash", {"*": "allow"}, "bash", ("anything",), "allow", None, "global"),
    Case("4 universal mcp", {"*": "allow"}, "mcp", ("something",), "allow", None, "global"),
    Case("5 surface mismatch", {"bash": {"git *": "allow"}}, "mcp", ("git status",), "ask",
         origin="builtin"),
    Case("6 catch-all last", {"path": {"*.env": "deny", "*": "allow"}}, "path", (".env",), "allow"),
    Case("7 .env", P7, "path", (".env",), "deny"),
    Case("7 .env.local", P7, "path", (".env.local",), "deny"),
    Case("7 src/.env", P7, "path", ("src/.env",), "deny"),
    Case("7 .env.example", P7, "path", (".env.example",), "allow"),
    Case("8 relative deny", {"path": {"*": "allow", "src/*": "deny"}}, "path", ALIASES, "deny",
         "src/*"),
    Case("9 absolute allow", {"path": {"*": "ask", "/proj/*": "allow"}}, "path", ALIASES, "allow",
         "/proj/*"),
    Case("10 first non-default candidate", {"mcp": {"exa_search": "deny", "mcp": "allow"}},
         "mcp", ("exa_search", "mcp"), "deny", "exa_search"),
    Case("11 most restrictive unit", {"bash": {"cd *": "allow", "npm *": "deny"}}, "bash",
         ("cd /repo && npm install x",), "deny", "npm *",
         units=(AskingUnit("cd /repo"), AskingUnit("npm install x"))),
    Case("12 posix", {"external_directory": {"*": "deny", "C:\\Users\\Foo\\pi\\*": "allow"}},
         "external_directory", ("c:\\users\\foo\\pi\\docs\\readme.md",), "deny"),
    Case("13 posix case-sensitive", {"bash": {"git *": "allow"}}, "bash", ("GIT push",), "ask"),
    Case("14 optional tail", {"bash": {"rm -rf *": "deny"}}, "bash", ("rm -rf",), "deny"),
    Case("15 ? matches one", {"skill": {"a?c": "allow"}}, "skill", ("abc",), "allow"),
    Case("15 ? needs a char", {"skill": {"a?c": "allow"}}, "skill", ("ac",), "ask"),
    Case("16 home value", {"path": {"~/.ssh/*": "deny"}}, "path", ("/home/me/.ssh/id_rsa",),
         "deny", "~/.ssh/*"),
    # The child sends every alias (`docs/design/contract.md` § Facts and judgment); values are matched as
    # sent, never home-expanded here (issue 11, fix 4), as the reference's path-values check does.
    Case("16 tilde value with its alias", {"path": {"~/.ssh/*": "deny"}}, "path",
         ("~/.ssh/config", "/home/me/.ssh/config"), "deny", "~/.ssh/*"),
    Case("16 tilde value alone is matched as sent", {"path": {"~/.ssh/*": "deny"}}, "path",
         ("~/.ssh/config",), "ask"),
    Case("18 yolo ask", {"bash": {"*": "ask"}, "path": {".env": "deny"}}, "bash", ("npm i",),
         "allow", "*", "yolo", knobs={"yoloMode": True}),
    Case("18 yolo keeps deny", {"bash": {"*": "ask"}, "path": {".env": "deny"}}, "path",
         (".env",), "deny", ".env", "global", knobs={"yoloMode": True}),
    Case("19 units ask", S19, "bash", ("ls && rm -rf /tmp/x",), "ask", units=UNITS19),
    Case("19 units deny", {"bash": {**S19["bash"], "rm *": "deny"}}, "bash",
         ("ls && rm -rf /tmp/x",), "deny", "rm *", units=UNITS19),
    Case("19 no units", S19, "bash", ("ls && rm -rf /tmp/x",), "allow", "ls*"),
    Case("20 floor", {"*": "allow"}, "bash", ("sudo rm x",), "ask", WRAPPER, floor=WRAPPER),
    Case("20 floor vs deny", {"*": "allow", "bash": {"sudo *": "deny"}}, "bash", ("sudo rm x",),
         "deny", "sudo *", floor=WRAPPER),
    Case("20 floor with yolo", {"*": "allow"}, "bash", ("sudo rm x",), "allow", WRAPPER, "yolo",
         floor=WRAPPER, knobs={"yoloMode": True}),
    Case("21 family fold", {"*": "allow", "path_write": {"/secrets/*": "deny"}}, "path",
         ("/secrets/id_rsa",), "deny", "/secrets/*"),
    Case("22 read allowed", S22, "external_directory_read", ("/dev-root/x",), "allow",
         "/dev-root/*"),
    Case("22 write asks", S22, "external_directory_write", ("/dev-root/x",), "ask"),
    Case("23 deep file", E23, "external_directory",
         ("/home/me/.cargo/registry/src/x/lib.rs",), "allow", "~/.cargo/registry/*"),
    Case("23 bare dir", E23, "external_directory", ("~/.cargo/registry",), "ask"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_worked_example(tmp_path: Path, case: Case) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": case.permission, **case.knobs})
    result = resolve(layout.store(), case.surface, *case.values, floor=case.floor,
                     asking_units=case.units)
    assert result.verdict == case.verdict, result.trail
    assert result.trail[-1] == {"step": "verdict", "verdict": result.verdict,
                                "decidedBy": result.decided_by()}
    assert any(line.startswith("evaluate ") for line in render_trail(result.trail))
    decided = result.decided_by()
    if case.verdict == "ask":
        assert decided is None
    else:
        assert decided is not None
        assert decided["kind"] == "rule"
        assert decided["surface"] == case.surface
        if case.pattern != "<unchecked>":
            assert decided["pattern"] == case.pattern
        if case.origin is not None:
            assert decided["origin"] == case.origin
    if case.origin is not None and result.outcome is not None:
        assert result.outcome.origin == case.origin


def test_17_agent_scope_wins(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"git *": "ask"}}})
    layout.write_agent("Explore", 'permission:\n  bash:\n    "git *": allow\n')
    store = layout.store()
    explore = resolve(store, "bash", "git status", agent="Explore")
    assert explore.verdict == "allow"
    assert explore.decided_by() == {"kind": "rule", "surface": "bash", "pattern": "git *",
                                    "origin": "agent"}
    assert resolve(store, "bash", "git status", agent="Other").verdict == "ask"


def test_deny_reason_is_relayed(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"bash": {"git push *": {"action": "deny",
                                                              "reason": "use staging"}}}})
    result = resolve(layout.store(), "bash", "git push origin")
    assert result.verdict == "deny"
    assert result.deny_reason == "use staging"


def test_trail_names_the_winner(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.write_global({"permission": {"path": {"*": "allow", "src/*": "deny"}}})
    result = resolve(layout.store(), "path", *ALIASES)
    evaluations = [s for s in result.trail if s["step"] == "evaluate"]
    assert [s["surface"] for s in evaluations] == ["path_read", "path_write"]
    first = evaluations[0]
    assert first["winner"]["pattern"] == "src/*"  # type: ignore[index]
    assert first["winner"]["value"] == "src/foo.ts"  # type: ignore[index]
    assert result.trail[-1] == {"step": "verdict", "verdict": "deny",
                                "decidedBy": result.decided_by()}
