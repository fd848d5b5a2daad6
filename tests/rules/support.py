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
