"""Real config files in a temporary folder, for the rules tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.rules import IntentFacts, PolicyStore, Resolution, resolve_with_policy

HOME = "/home/me"


class Layout:
    """An agent dir and a project dir under `root`, with writers for each config layer."""

    def __init__(self, root: Path) -> None:
        self.agent_dir = root / "agent"
        self.project = root / "project"
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)

    @property
    def global_config(self) -> Path:
        return self.agent_dir / "extensions" / "pi-permission-system" / "config.json"

    @property
    def project_config(self) -> Path:
        return self.project / ".pi" / "extensions" / "pi-permission-system" / "config.json"

    def agent_file(self, name: str, *, project: bool = False) -> Path:
        base = self.project / ".pi" if project else self.agent_dir
        return base / "agents" / f"{name}.md"

    def write(self, path: Path, content: str | dict[str, Any]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    def write_global(self, content: str | dict[str, Any]) -> Path:
        return self.write(self.global_config, content)

    def write_project(self, content: str | dict[str, Any]) -> Path:
        return self.write(self.project_config, content)

    def write_agent(self, name: str, frontmatter: str, *, project: bool = False) -> Path:
        return self.write(self.agent_file(name, project=project), f"---\n{frontmatter}---\n# {name}\n")

    def store(self, rules_file: Path | None = None) -> PolicyStore:
        return PolicyStore(self.agent_dir, self.project, rules_file, home=HOME)


def resolve(
    store: PolicyStore,
    surface: str,
    *values: str,
    agent: str = "Explore",
    **extra: Any,
) -> Resolution:
    """Resolve one ask with the given surface and match values."""
    facts = IntentFacts(surface=surface, match_values=tuple(values), **extra)
    return resolve_with_policy(store.policy(agent), facts)


HIDDEN = "contains control or hidden characters"



#: The odd names both former checks knew of, and the reason each now gets.
ODD_NAMES = {
    "": "empty agent name",
    " \t": "empty agent name",
    "unknown": "named 'unknown' (the child could not tell its agent name)",
    " Unknown ": "named 'unknown' (the child could not tell its agent name)",
    "a\x00b": "contains NUL",
    "sub/x": "contains a path separator",
    "sub\\x": "contains a path separator",
    "..": "contains '..'",
    "a..b": "contains '..'",
    "a\ud800b": "contains a lone surrogate (no file can have that name)",
    "a\tb": HIDDEN,
    "a\nb": HIDDEN,
    "a\x1b[31mb": HIDDEN,
    "a\u200db": HIDDEN,  # zero-width joiner
    "a\u202eb": HIDDEN,  # right-to-left override
    "a\u00a0b": HIDDEN,  # no-break space
    "a\u3164b": HIDDEN,  # Hangul filler (default-ignorable, not Cf)
    "a\ue000b": HIDDEN,  # private use
}



USABLE = ["Explore", "code-reviewer.v2", "a" * 200, "Prüfer", "エージェント"]
