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

import unicodedata
from dataclasses import replace
from pathlib import Path

from core.rules.policy import GLOBAL, Policy, compose
from core.rules.scopes import FileSignature, Scope, load_agent_scope, load_config_scope

EXTENSION = Path("extensions") / "pi-permission-system" / "config.json"
PROJECT_CONFIG = Path(".pi") / EXTENSION
AUTHORIZER = "authorizer"


UNKNOWN_AGENT_REASON = "agent name is 'unknown' (the child could not tell)"


def suspicious_agent_reason(name: str) -> str | None:
    """Why `name` must not be used as a file name, or None when it is usable."""
    if not name.strip():
        return "empty agent name"
    if name.strip().lower() == "unknown":
        return UNKNOWN_AGENT_REASON
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

    def _scope(self, origin: str, path: Path, *, agent_file: bool, as_pi: bool) -> Scope:
        key = (f"pi:{origin}" if as_pi else origin, path)
        scope = self._scopes.get(key)
        if scope is None:
            load = load_agent_scope if agent_file else load_config_scope
            scope = load(path, origin, as_pi=as_pi)
            self._scopes[key] = scope
        return scope

    def _compose(self, agent_name: str) -> Policy:
        """This node's reading, with pi 20.7.3's reading attached when it composes differently."""
        ours = self._compose_reading(agent_name, as_pi=False)
        pi = self._compose_reading(agent_name, as_pi=True)
        return replace(ours, pi_reading=pi, pi_differs=_signature(pi) != _signature(ours))

    def _compose_reading(self, agent_name: str, *, as_pi: bool) -> Policy:
        configs = {o: self._scope(o, p, agent_file=False, as_pi=as_pi)
                   for o, p in self._config_paths().items()}
        reason = suspicious_agent_reason(agent_name)
        # pi opens `unknown.md` (any spelling) like any agent file, so its reading loads it; a name
        # that could leave the agents folder is never used as a file name, in either reading.
        loads_agent_files = reason is None or (as_pi and reason == UNKNOWN_AGENT_REASON)
        layers = [configs[GLOBAL]]
        if "project" in configs:
            layers.append(configs["project"])
        if loads_agent_files:
            layers.append(self._scope("agent", self.agent_dir / "agents" / f"{agent_name}.md",
                                      agent_file=True, as_pi=as_pi))
            if self.project_dir is not None:
                project_agent = self.project_dir / ".pi" / "agents" / f"{agent_name}.md"
                layers.append(self._scope("project-agent", project_agent, agent_file=True,
                                          as_pi=as_pi))
        if AUTHORIZER in configs:
            layers.append(configs[AUTHORIZER])
        settings_layers = [s for s in layers if s.origin in configs and not s.invalid]
        return compose(agent_name, reason, layers, settings_layers, self.home, as_pi=as_pi)


def _signature(policy: Policy) -> tuple[object, ...]:
    """What decides a verdict and its provenance: the effective rules in order, as compiled."""
    return (policy.folds, *((r.surface, r.pattern, r.action, r.origin, r.layer, r.reason,
                             r.pattern_wildcard.expanded) for r in policy.effective_rules))
