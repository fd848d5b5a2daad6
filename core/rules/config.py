"""The layered config of this node, loaded per agent, cached, and reloaded when files change.

Layers, lowest first (contract §6.1): global `<agentDir>/extensions/pi-permission-system/
config.json`, project `<project>/.pi/extensions/pi-permission-system/config.json`, global agent
`<agentDir>/agents/<agent>.md`, project agent `<project>/.pi/agents/<agent>.md`, and last the
optional pi-authorizer rules file (`--rules FILE`, config.json shape, origin `authorizer`). Its
knobs apply too, after the global and project ones; agent files never set knobs.

The agent name arrives from the child and is untrusted: a name that could escape the agents
folder, or that names nobody, loads no agent file and marks the policy suspicious.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from core.rules.policy import GLOBAL, Policy, compose
from core.rules.scopes import FileSignature, Scope, load_agent_scope, load_config_scope

EXTENSION = Path("extensions") / "pi-permission-system" / "config.json"
PROJECT_CONFIG = Path(".pi") / EXTENSION
AUTHORIZER = "authorizer"
#: Agent files read per agents folder when a grant is checked against every agent's scope.
MAX_AGENT_FILES = 10_000


def suspicious_agent_reason(name: str) -> str | None:
    """Why `name` must not be used as a file name, or None when it is usable."""
    if not name.strip():
        return "empty agent name"
    if name.strip().lower() == "unknown":
        return "agent name is 'unknown' (the child could not tell)"
    if "\x00" in name:
        return "agent name contains NUL"
    if "/" in name or "\\" in name:
        return "agent name contains a path separator"
    if ".." in name:
        return "agent name contains '..'"
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in name):
        return "agent name contains control characters"
    return None


class PolicyStore:
    """Loads scopes once, composes one policy per agent name, and notices file changes."""

    def __init__(
        self,
        agent_dir: Path,
        project_dir: Path | None = None,
        rules_file: Path | None = None,
        *,
        home: str | None = None,
    ) -> None:
        self.agent_dir = agent_dir
        self.project_dir = project_dir
        self.rules_file = rules_file
        self.home = home if home is not None else str(Path.home())
        self._scopes: dict[tuple[str, Path], Scope] = {}
        self._policies: dict[str, Policy] = {}

    def policy(self, agent_name: str) -> Policy:
        """The composed policy for `agent_name` (cached until a source file changes)."""
        cached = self._policies.get(agent_name)
        if cached is None:
            cached = self._compose(agent_name)
            self._policies[agent_name] = cached
        return cached

    def known_agents(self) -> tuple[str, ...]:
        """Agents with an agent file in either agents folder (usable names only, sorted, at most
        `MAX_AGENT_FILES` per folder): whose scopes a whole-session grant must not override."""
        names: set[str] = set()
        folders = [self.agent_dir / "agents"]
        if self.project_dir is not None:
            folders.append(self.project_dir / ".pi" / "agents")
        for folder in folders:
            try:
                with os.scandir(folder) as entries:
                    for count, entry in enumerate(entries):
                        if count >= MAX_AGENT_FILES:
                            break
                        name = entry.name.removesuffix(".md")
                        if entry.name.endswith(".md") and suspicious_agent_reason(name) is None:
                            names.add(name)
            except OSError:
                continue
        return tuple(sorted(names))

    def watched_paths(self) -> tuple[Path, ...]:
        """Every file a cached policy was (or would be) built from; a watcher should watch their
        parent folders too, since a file that does not exist yet may be created."""
        paths = {path for _, path in self._scopes} | set(self._config_paths().values())
        return tuple(sorted(paths))

    def reload_if_changed(self) -> bool:
        """Drop every scope whose file changed since it was read; True when anything did."""
        stale = [key for key, scope in self._scopes.items()
                 if FileSignature.of(key[1]) != scope.signature]
        for key in stale:
            del self._scopes[key]
        if stale:
            self._policies.clear()
        return bool(stale)

    def _config_paths(self) -> dict[str, Path]:
        paths = {GLOBAL: self.agent_dir / EXTENSION}
        if self.project_dir is not None:
            paths["project"] = self.project_dir / PROJECT_CONFIG
        if self.rules_file is not None:
            paths[AUTHORIZER] = self.rules_file
        return paths

    def _scope(self, origin: str, path: Path, *, agent_file: bool) -> Scope:
        key = (origin, path)
        scope = self._scopes.get(key)
        if scope is None:
            scope = load_agent_scope(path, origin) if agent_file else load_config_scope(path, origin)
            self._scopes[key] = scope
        return scope

    def _compose(self, agent_name: str) -> Policy:
        configs = {o: self._scope(o, p, agent_file=False) for o, p in self._config_paths().items()}
        reason = suspicious_agent_reason(agent_name)
        layers = [configs[GLOBAL]]
        if "project" in configs:
            layers.append(configs["project"])
        if reason is None:
            layers.append(self._scope("agent", self.agent_dir / "agents" / f"{agent_name}.md",
                                      agent_file=True))
            if self.project_dir is not None:
                project_agent = self.project_dir / ".pi" / "agents" / f"{agent_name}.md"
                layers.append(self._scope("project-agent", project_agent, agent_file=True))
        if AUTHORIZER in configs:
            layers.append(configs[AUTHORIZER])
        settings_layers = [s for s in layers if s.origin in configs and not s.invalid]
        return compose(agent_name, reason, layers, settings_layers, self.home)
