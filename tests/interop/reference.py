"""Judging the same config files and facts with the real 20.7.3 `PermissionManager` and with ours.

A `Case` is a set of config files (relative to a case folder holding `agent/` and `project/`) plus
the facts of one ask. `reference_verdicts` judges a whole batch in ONE node process (node/judge.ts);
`our_verdict` judges one case with pi-authorizer's resolution over the same files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.rules import IntentFacts, PolicyStore
from core.rules.resolver import resolve_with_policy
from tests.interop.harness import NodeDriver

HOME = "/home/me"
GLOBAL = "agent/extensions/pi-permission-system/config.json"
PROJECT = "project/.pi/extensions/pi-permission-system/config.json"
# 20.7.3's path surfaces (evaluateAnyValue); `mcp` candidates go through evaluateFirst as given.
REFERENCE_PATH_SURFACES = frozenset({"read", "write", "edit", "find", "grep", "ls", "path",
                                     "external_directory"})
BATCH_TIMEOUT_S = 300.0


def agent_file(name: str, *, project: bool = False) -> str:
    """The case-relative path of an agent file."""
    return f"project/.pi/agents/{name}.md" if project else f"agent/agents/{name}.md"


@dataclass(frozen=True)
class Verdict:
    """What decided: the verdict, the matched config/session pattern (None otherwise), the origin."""

    state: str
    pattern: str | None
    origin: str | None
    note: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.state} by {self.pattern!r} ({self.origin})"


@dataclass(frozen=True)
class Case:
    """Config files (case-relative path -> text) and one ask's facts."""

    files: dict[str, str]
    agent: str
    surface: str
    values: tuple[str, ...]

    def write(self, root: Path) -> Path:
        """Write the files under `root` (created) and return it."""
        for relative, text in self.files.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8", "surrogatepass"))
        (root / "agent").mkdir(parents=True, exist_ok=True)
        (root / "project").mkdir(parents=True, exist_ok=True)
        return root

    def reference_input(self, root: Path) -> dict[str, object]:
        """The `check()` call the 20.7.3 forwarded-request server makes for these facts."""
        item: dict[str, object] = {"agentDir": str(root / "agent"), "cwd": str(root / "project"),
                                   "agent": self.agent, "surface": self.surface}
        if self.surface in REFERENCE_PATH_SURFACES or self.surface == "mcp":
            item.update(kind="path-values", values=list(self.values))
        elif self.surface == "bash":  # buildInputForSurface: a missing value is ""
            item.update(kind="tool", input={"command": self.values[0] if self.values else ""})
        elif self.surface == "skill":
            item.update(kind="tool", input={"name": self.values[0] if self.values else ""})
        else:
            item.update(kind="tool", input={})
        return item

    def reproduction(self, ours: Verdict, theirs: Verdict) -> str:
        """A minimal, copyable account of the case and both verdicts."""
        lines = [f"agent={self.agent!r} surface={self.surface!r} matchValues={list(self.values)!r}",
                 f"  pi-authorizer: {ours}" + (f" [{ours.note}]" if ours.note else ""),
                 f"  reference:     {theirs}"]
        for relative, text in self.files.items():
            lines.append(f"  --- {relative}\n    " + text.replace("\n", "\n    "))
        return "\n".join(lines)


def reference_verdicts(driver: NodeDriver, cases: Sequence[tuple[Case, Path]]) -> list[Verdict]:
    """Judge every (case, written folder) with the real `PermissionManager`, in one process."""
    payload = json.dumps([case.reference_input(root) for case, root in cases])
    result = driver.run("judge.ts", [], stdin=payload, env={"HOME": HOME}, timeout_s=BATCH_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    rows = result.json_line()
    verdicts = []
    for row in rows:
        assert "error" not in row, row
        verdicts.append(Verdict(row["state"], row["matchedPattern"], row["origin"]))
    return verdicts


def our_verdict(case: Case, root: Path) -> Verdict:
    """Judge the case with pi-authorizer's resolution over the written files."""
    store = PolicyStore(root / "agent", root / "project", home=HOME)
    resolution = resolve_with_policy(store.policy(case.agent), IntentFacts(case.surface, case.values))
    outcome = resolution.outcome
    assert outcome is not None
    return Verdict(resolution.verdict, outcome.matched_pattern, outcome.origin)
