"""Where this node's config layers live, and how one file is loaded in both readings.

Layers, lowest first (`docs/design/contract.md` § Rules): global `<agentDir>/extensions/pi-permission-system/
config.json`, project `<project>/.pi/extensions/pi-permission-system/config.json`, global agent
`<agentDir>/agents/<agent>.md`, project agent `<project>/.pi/agents/<agent>.md`, and last the
optional pi-authorizer rules file (`--rules FILE`, config.json shape, origin `authorizer`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from core.rules.agent_names import pi_opens, suspicious_agent_reason
from core.rules.model import ConfigError
from core.rules.policy import GLOBAL
from core.rules.scopes import FileSignature, Scope, load_agent_scope, load_config_scope

EXTENSION = Path("extensions") / "pi-permission-system" / "config.json"
PROJECT_CONFIG = Path(".pi") / EXTENSION
AUTHORIZER = "authorizer"
AGENT_ORIGINS = frozenset({"agent", "project-agent"})
ScopeKey = tuple[str, Path]
#: Agent files read per agents folder when a grant is checked against every agent's scope.
MAX_AGENT_FILES = 10_000
#: Entries listed per agents folder, junk included: a folder of a million junk names stays bounded.
MAX_LISTED_ENTRIES = 100_000


@dataclass(frozen=True, slots=True)
class Sources:
    """The files of one node's layers: its agent dir, its project (if any) and its rules file."""

    agent_dir: Path
    project_dir: Path | None
    rules_file: Path | None

    def config_paths(self) -> dict[str, Path]:
        """The config.json-shaped layers by origin (agent files aside)."""
        paths = {GLOBAL: self.agent_dir / EXTENSION}
        if self.project_dir is not None:
            paths["project"] = self.project_dir / PROJECT_CONFIG
        if self.rules_file is not None:
            paths[AUTHORIZER] = self.rules_file
        return paths

    def agent_paths(self, agent_name: str) -> list[ScopeKey]:
        """The agent files of a usable `agent_name`, global first."""
        paths = [("agent", self.agent_dir / "agents" / f"{agent_name}.md")]
        if self.project_dir is not None:
            paths.append(("project-agent", self.project_dir / ".pi" / "agents" / f"{agent_name}.md"))
        return paths

    def pi_agent_paths(self, agent_name: str) -> list[ScopeKey]:
        """The agent files pi opens for a suspicious `agent_name` (joined as node's `path.join`
        does); a name that leaves the agents folder (`../x`) is not followed."""
        if not pi_opens(agent_name):
            return []
        paths: list[ScopeKey] = []
        for origin, folder in self.agent_paths("x"):
            base = os.path.normpath(folder.parent)
            joined = os.path.normpath(os.path.join(base, f"{agent_name}.md"))
            if os.path.commonpath([base, joined]) == base and joined != base:
                paths.append((origin, Path(joined)))
        return paths

    def agent_files(self) -> list[Path]:
        """Agent files with usable names in either agents folder (at most `MAX_AGENT_FILES` each).
        Junk does not count toward that limit: other names, folders, FIFOs and sockets named `*.md`
        (a folder is still listed at most `MAX_LISTED_ENTRIES` deep)."""
        files: list[Path] = []
        folders = [self.agent_dir / "agents"]
        if self.project_dir is not None:
            folders.append(self.project_dir / ".pi" / "agents")
        for folder in folders:
            found = 0
            try:
                with os.scandir(folder) as entries:
                    for listed, entry in enumerate(entries):
                        if found >= MAX_AGENT_FILES or listed >= MAX_LISTED_ENTRIES:
                            break
                        name = entry.name.removesuffix(".md")
                        if entry.name.endswith(".md") and suspicious_agent_reason(name) is None \
                                and _regular(entry):
                            files.append(folder / entry.name)
                            found += 1
            except OSError:
                continue
        return files


def _regular(entry: os.DirEntry[str]) -> bool:
    """A regular file (through a link, as pi reads it)."""
    try:
        return entry.is_file()
    except OSError:
        return False


def load_scope(key: ScopeKey, *, agent_file: bool) -> Scope:
    """Load one file in both readings (ours, with pi 20.7.3's attached as `pi_reading`);
    whatever goes wrong is a config error of that file, never an exception."""
    ours = load_reading(key, agent_file=agent_file, as_pi=False)
    pi = load_reading(key, agent_file=agent_file, as_pi=True)
    return dataclasses.replace(ours, pi_reading=pi)


def load_reading(key: ScopeKey, *, agent_file: bool, as_pi: bool) -> Scope:
    """One reading of one file; a failure becomes the file's config error."""
    origin, path = key
    try:
        load = load_agent_scope if agent_file else load_config_scope
        return load(path, origin, as_pi=as_pi)
    except RecursionError:
        reason = "nested too deeply"
    except Exception as exc:  # a config file must never stop serving
        reason = f"could not be loaded: {type(exc).__name__}: {exc}"
    return Scope(origin, FileSignature.of(path), errors=(ConfigError(str(path), "(file)", reason),))


def reading(scope: Scope, as_pi: bool) -> Scope:
    """`scope` as the reading asks; a scope loaded without pi's reading is read the same by both."""
    if as_pi and scope.pi_reading is not None:
        return scope.pi_reading
    return scope


class PiOnlyFiles:
    """pi's reading of agent files only pi opens (a suspicious name; `Sources.pi_agent_paths`),
    each cached while its signature holds, at most `limit` at a time."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._scopes: dict[Path, Scope] = {}

    def scope(self, origin: str, path: Path) -> Scope:
        """pi's reading of `path`, loaded again when the file changed."""
        cached = self._scopes.get(path)
        if cached is not None and cached.signature == FileSignature.of(path):
            return cached
        if len(self._scopes) >= self.limit:
            self._scopes.clear()
        scope = load_reading((origin, path), agent_file=True, as_pi=True)
        self._scopes[path] = scope
        return scope

    def paths(self) -> set[Path]:
        """The files held (a watcher watches them too)."""
        return set(self._scopes)

    def forget_changed(self) -> bool:
        """Forget every file whose signature changed; True when any did."""
        changed = [p for p, scope in self._scopes.items() if FileSignature.of(p) != scope.signature]
        for path in changed:
            del self._scopes[path]
        return bool(changed)
