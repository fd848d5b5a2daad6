"""The layered config of this node, loaded per agent, cached, and reloaded when files change.

Layers, lowest first (`docs/contract.md` § Rules): global `<agentDir>/extensions/pi-permission-system/
config.json`, project `<project>/.pi/extensions/pi-permission-system/config.json`, global agent
`<agentDir>/agents/<agent>.md`, project agent `<project>/.pi/agents/<agent>.md`, and last the
optional pi-authorizer rules file (`--rules FILE`, config.json shape, origin `authorizer`). Its
knobs apply too, after the global and project ones; agent files never set knobs.

The agent name arrives from the child and is untrusted: a name that could escape the agents
folder, or that names nobody, loads no agent file and marks the policy suspicious. Composed
policies are kept in an LRU of `MAX_CACHED_POLICIES` names; a name without agent files shares the
agent-neutral policy's compiled rules, so thousands of names cost little.

Reloads go through a gate (`core.rules.reloads`): a changed file that only narrows is applied, one
that widens is held as a `PendingReload` until `accept()` (or applied at once, logged, with
`accept_widening=True`). Files present when the store was created are trusted as they are; one
created or changed later is compared against an empty file when it is first read.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from core.rules.model import ConfigError
from core.rules.policy import GLOBAL, Policy, compose
from core.rules.reloads import Change, PendingReload, scope_changes
from core.rules.scopes import FileSignature, Scope, load_agent_scope, load_config_scope

EXTENSION = Path("extensions") / "pi-permission-system" / "config.json"
PROJECT_CONFIG = Path(".pi") / EXTENSION
AUTHORIZER = "authorizer"
log = logging.getLogger("pi_authorizer.rules")
ScopeKey = tuple[str, Path]
#: Composed policies kept (least recently used names are dropped and recomposed on demand).
MAX_CACHED_POLICIES = 256
#: Agent files read per agents folder when a grant is checked against every agent's scope.
MAX_AGENT_FILES = 10_000


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
    if any(unicodedata.category(c) == "Cs" for c in name):
        return "agent name contains a lone surrogate (no file can have that name)"
    return None


def pi_opens(name: str) -> bool:
    """pi 20.7.3 opens `<agents>/<name>.md` for this name (any non-empty name a file can have)."""
    return bool(name) and "\x00" not in name and not any(
        unicodedata.category(c) == "Cs" for c in name)


class PolicyStore:
    """Loads scopes once, composes one policy per agent name, and gates reloads of changed files."""

    def __init__(
        self,
        agent_dir: Path,
        project_dir: Path | None = None,
        rules_file: Path | None = None,
        *,
        home: str | None = None,
        accept_widening: bool = False,
    ) -> None:
        self.agent_dir = agent_dir
        self.project_dir = project_dir
        self.rules_file = rules_file
        self.home = home if home is not None else str(Path.home())
        self.accept_widening = accept_widening
        self._scopes: dict[ScopeKey, Scope] = {}
        self._pi_only: dict[Path, Scope] = {}
        self._policies: OrderedDict[str, Policy] = OrderedDict()
        self._neutral: Policy | None = None
        self._pending: dict[ScopeKey, PendingReload] = {}
        self._listeners: list[Callable[[PendingReload], None]] = []
        # The files as they are now are what the person started this node with.
        self._trusted = {path: FileSignature.of(path)
                         for path in (*self._config_paths().values(), *self._agent_files())}
        for origin, path in self._config_paths().items():
            self._scope(origin, path, agent_file=False)

    # -- policies --------------------------------------------------------------------------------

    def policy(self, agent_name: str) -> Policy:
        """The composed policy for `agent_name` (cached until a source file changes)."""
        cached = self._policies.get(agent_name)
        if cached is not None:
            self._policies.move_to_end(agent_name)
            return cached
        composed = self._compose(agent_name)
        self._policies[agent_name] = composed
        if len(self._policies) > MAX_CACHED_POLICIES:
            evicted, _ = self._policies.popitem(last=False)
            self._drop_missing_agent_scopes(self._agent_paths(evicted))
        return composed

    def cached_policies(self) -> int:
        """How many composed policies are held (bounded by `MAX_CACHED_POLICIES`)."""
        return len(self._policies)

    def known_agents(self) -> tuple[str, ...]:
        """Agents with an agent file in either agents folder (usable names only, sorted, at most
        `MAX_AGENT_FILES` per folder): whose scopes a whole-session grant must not override."""
        return tuple(sorted({path.name.removesuffix(".md") for path in self._agent_files()}))

    def watched_paths(self) -> tuple[Path, ...]:
        """Every file a cached policy was (or would be) built from; a watcher should watch their
        parent folders too, since a file that does not exist yet may be created."""
        paths = {path for _, path in self._scopes} | set(self._config_paths().values()) | set(self._pi_only)
        return tuple(sorted(paths))

    # -- the reload gate ---------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[PendingReload], None]) -> None:
        """Called with each reload that is held because it widens."""
        self._listeners.append(listener)

    def pending(self) -> tuple[PendingReload, ...]:
        """Changed files held back because they widen a permission, oldest first."""
        return tuple(self._pending.values())

    def accept(self, pending: PendingReload) -> bool:
        """Apply the reviewed version (exactly the one whose diff was shown); False if superseded."""
        key = (pending.origin, Path(pending.path))
        if self._pending.get(key) is not pending:
            return False
        del self._pending[key]
        self._apply(key, pending.new)
        log.warning("config change to %s accepted: %s", pending.path, "; ".join(pending.diff_lines()))
        return True

    def apply_confirmed(self, path: Path) -> None:
        """Re-read a file this node just wrote after a person confirmed its diff (a rule accepted
        in the review screen) and apply it without asking again."""
        for key in [k for k in self._scopes if k[1] == path]:
            self._pending.pop(key, None)
            self._apply(key, self._load(key, agent_file=key[0] in _AGENT_ORIGINS))

    def decline(self, pending: PendingReload) -> bool:
        """Keep the applied version; the file is proposed again only when it changes again."""
        key = (pending.origin, Path(pending.path))
        if self._pending.get(key) is not pending:
            return False
        del self._pending[key]
        return True

    def reload_if_changed(self) -> bool:
        """Re-read every file whose signature changed: apply narrowing changes, hold widening ones.
        True when anything was applied."""
        for origin, path in self._config_paths().items():
            self._scope(origin, path, agent_file=False)  # a config file first read now is gated too
        stale = [(key, scope) for key, scope in self._scopes.items()
                 if FileSignature.of(key[1]) != scope.signature]
        applied = False
        changed_pi_only = [p for p, scope in self._pi_only.items() if FileSignature.of(p) != scope.signature]
        if changed_pi_only:  # read by pi's reading alone, so a change can only tighten a verdict
            for path in changed_pi_only:
                del self._pi_only[path]
            self._policies.clear()
            applied = True
        for key, scope in stale:
            self._pending.pop(key, None)
            applied |= self._offer(key, scope, self._load(key, agent_file=scope.origin in _AGENT_ORIGINS))
        return applied

    def _offer(self, key: ScopeKey, applied: Scope, fresh: Scope) -> bool:
        """Gate one changed file: True when `fresh` was applied."""
        changes = self._changes(key, applied, fresh, as_pi=False)
        # pi 20.7.3's reading of the same file is gated too: a change that widens only as pi
        # reads it is held like any other (the diff marks those lines).
        seen = set(changes)
        changes += tuple(
            dataclasses.replace(change, surface=change.surface + PI_READING_MARK)
            for change in self._changes(key, applied, fresh, as_pi=True) if change not in seen
        )
        if not any(change.widens for change in changes) or self.accept_widening:
            if any(change.widens for change in changes):
                log.warning("config change to %s widens permissions; applied (--accept-widening-reloads)"
                            ": %s", key[1], "; ".join(c.describe() for c in changes if c.widens))
            self._apply(key, fresh)
            return True
        # Held: keep the applied content under the new signature, so the same version is not
        # offered again on every re-check.
        self._scopes[key] = dataclasses.replace(applied, signature=fresh.signature)
        pending = PendingReload(key[0], str(key[1]), applied, fresh, changes)
        self._pending[key] = pending
        for listener in list(self._listeners):
            listener(pending)
        return False

    def _changes(self, key: ScopeKey, applied: Scope, fresh: Scope, *, as_pi: bool) -> tuple[Change, ...]:
        before, after = _reading(applied, as_pi), _reading(fresh, as_pi)
        if as_pi and before is applied and after is fresh:
            return ()
        bare = frozenset(surface for other, scope in self._scopes.items() if other != key
                         for surface, value in _reading(scope, as_pi).permission.items()
                         if not value.is_map)
        return scope_changes(before, after, floors=key[0] != GLOBAL, bare_elsewhere=bare)

    def _apply(self, key: ScopeKey, scope: Scope) -> None:
        self._scopes[key] = scope
        self._policies.clear()
        self._neutral = None
        self._drop_missing_agent_scopes([k for k in self._scopes if k[0] in _AGENT_ORIGINS])

    def _drop_missing_agent_scopes(self, keys: list[ScopeKey]) -> None:
        """Forget "no agent file" scopes no cached policy uses, so the scopes (and the paths
        re-checked on every reload) stay bounded by the cache, whatever names children send."""
        for key in keys:
            scope = self._scopes.get(key)
            if scope is not None and not scope.signature.exists and key not in self._pending:
                del self._scopes[key]

    # -- loading -----------------------------------------------------------------------------------

    def _agent_files(self) -> list[Path]:
        files: list[Path] = []
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
                            files.append(folder / entry.name)
            except OSError:
                continue
        return files

    def _config_paths(self) -> dict[str, Path]:
        paths = {GLOBAL: self.agent_dir / EXTENSION}
        if self.project_dir is not None:
            paths["project"] = self.project_dir / PROJECT_CONFIG
        if self.rules_file is not None:
            paths[AUTHORIZER] = self.rules_file
        return paths

    def _load(self, key: ScopeKey, *, agent_file: bool) -> Scope:
        """Load one file in both readings (ours, with pi 20.7.3's attached as `pi_reading`);
        whatever goes wrong is a config error of that file, never an exception."""
        ours = self._load_reading(key, agent_file=agent_file, as_pi=False)
        pi = self._load_reading(key, agent_file=agent_file, as_pi=True)
        return dataclasses.replace(ours, pi_reading=pi)

    @staticmethod
    def _load_reading(key: ScopeKey, *, agent_file: bool, as_pi: bool) -> Scope:
        origin, path = key
        try:
            load = load_agent_scope if agent_file else load_config_scope
            return load(path, origin, as_pi=as_pi)
        except RecursionError:
            reason = "nested too deeply"
        except Exception as exc:  # a config file must never stop serving
            reason = f"could not be loaded: {type(exc).__name__}: {exc}"
        return Scope(origin, FileSignature.of(path), errors=(ConfigError(str(path), "(file)", reason),))

    def _scope(self, origin: str, path: Path, *, agent_file: bool) -> Scope:
        """Our reading of one file; pi's reading of the same version is its `pi_reading`."""
        key = (origin, path)
        scope = self._scopes.get(key)
        if scope is not None:
            return scope
        fresh = self._load(key, agent_file=agent_file)
        if not fresh.signature.exists or self._trusted.get(path) == fresh.signature:
            self._scopes[key] = fresh
            return fresh
        # A file created or changed since this store started, read for the first time: gate it
        # (both readings) like a reload of an empty file.
        empty = Scope(origin, FileSignature(str(path), False))
        self._scopes[key] = dataclasses.replace(empty, pi_reading=empty)
        self._offer(key, self._scopes[key], fresh)
        return self._scopes[key]

    def _neutral_policy(self) -> Policy:
        """Global, project and rules-file layers only: the policy of every name without agent files
        (both readings)."""
        if self._neutral is None:
            self._neutral = self._compose_both("", None, include_agent_files=False)
        return self._neutral

    def _compose(self, agent_name: str) -> Policy:
        """This node's reading, with pi 20.7.3's reading attached (`pi_differs` when it composes
        differently)."""
        reason = suspicious_agent_reason(agent_name)
        if reason is None and self._has_agent_file(agent_name):
            return self._compose_both(agent_name, None, include_agent_files=True)
        pi_only = [self._pi_only_scope(o, p) for o, p in self._pi_agent_paths(agent_name)] \
            if reason is not None else []
        if any(scope.signature.exists for scope in pi_only):
            # pi opens `<name>.md` for any non-empty name (`unknown`, a tab, a zero-width joiner,
            # `sub/x`), so its reading loads the file and its denies and asks still hold; ours
            # never uses a suspicious name as a file name, so its allows never do. Such a file
            # is read in pi's reading only, past the reload gate: it can only tighten a verdict.
            ours = self._compose_layers(agent_name, reason, include_agent_files=False, as_pi=False)
            return self._with_pi(ours, agent_name, reason, include_agent_files=True, agent_scopes=pi_only)
        # Shares the neutral policy's compiled rules and per-surface candidates (both readings).
        neutral = self._neutral_policy()
        pi_reading, directional = neutral.pi_reading, neutral.pi_directional
        if pi_reading is not None:
            pi_reading = dataclasses.replace(pi_reading, agent_name=agent_name,
                                             suspicious_agent_reason=reason)
        if directional is not None:
            directional = dataclasses.replace(directional, agent_name=agent_name,
                                              suspicious_agent_reason=reason)
        return dataclasses.replace(neutral, agent_name=agent_name, suspicious_agent_reason=reason,
                                   pi_reading=pi_reading, pi_directional=directional)

    def _has_agent_file(self, agent_name: str) -> bool:
        return any(self._scope(origin, path, agent_file=True).signature.exists
                   for origin, path in self._agent_paths(agent_name))

    def _agent_paths(self, agent_name: str) -> list[ScopeKey]:
        paths = [("agent", self.agent_dir / "agents" / f"{agent_name}.md")]
        if self.project_dir is not None:
            paths.append(("project-agent", self.project_dir / ".pi" / "agents" / f"{agent_name}.md"))
        return paths

    def _pi_agent_paths(self, agent_name: str) -> list[ScopeKey]:
        """The agent files pi opens for a suspicious `agent_name` (joined as node's `path.join`
        does); a name that leaves the agents folder (`../x`) is not followed."""
        if not pi_opens(agent_name):
            return []
        paths: list[ScopeKey] = []
        for origin, folder in self._agent_paths("x"):
            base = os.path.normpath(folder.parent)
            joined = os.path.normpath(os.path.join(base, f"{agent_name}.md"))
            if os.path.commonpath([base, joined]) == base and joined != base:
                paths.append((origin, Path(joined)))
        return paths

    def _compose_both(self, agent_name: str, reason: str | None, *, include_agent_files: bool) -> Policy:
        ours = self._compose_layers(agent_name, reason, include_agent_files=include_agent_files,
                                    as_pi=False)
        return self._with_pi(ours, agent_name, reason, include_agent_files=include_agent_files)

    def _with_pi(self, ours: Policy, agent_name: str, reason: str | None, *, include_agent_files: bool,
                 agent_scopes: list[Scope] | None = None) -> Policy:
        """`ours` with pi 20.7.3's reading attached, and pi's reading of the files composed with
        the family fold (which 20.7.3 does not know), for asks on a directional surface."""
        pi = self._compose_layers(agent_name, reason, include_agent_files=include_agent_files,
                                  as_pi=True, agent_scopes=agent_scopes)
        directional = self._compose_layers(agent_name, reason, include_agent_files=include_agent_files,
                                           as_pi=True, agent_scopes=agent_scopes, fold_families=True)
        return dataclasses.replace(ours, pi_reading=pi, pi_directional=directional,
                                   pi_differs=_signature(pi) != _signature(ours))

    def _pi_only_scope(self, origin: str, path: Path) -> Scope:
        """pi's reading of an agent file only pi opens (cached while its signature holds)."""
        cached = self._pi_only.get(path)
        if cached is not None and cached.signature == FileSignature.of(path):
            return cached
        if len(self._pi_only) >= MAX_CACHED_POLICIES:
            self._pi_only.clear()
        scope = self._load_reading((origin, path), agent_file=True, as_pi=True)
        self._pi_only[path] = scope
        return scope

    def _compose_layers(
        self, agent_name: str, reason: str | None, *, include_agent_files: bool, as_pi: bool,
        agent_scopes: list[Scope] | None = None, fold_families: bool = False,
    ) -> Policy:
        configs = {o: _reading(self._scope(o, p, agent_file=False), as_pi)
                   for o, p in self._config_paths().items()}
        layers = [configs[GLOBAL]]
        if "project" in configs:
            layers.append(configs["project"])
        if agent_scopes is not None:
            layers += agent_scopes
        elif include_agent_files:
            layers += [_reading(self._scope(o, p, agent_file=True), as_pi)
                       for o, p in self._agent_paths(agent_name)]
        if AUTHORIZER in configs:
            layers.append(configs[AUTHORIZER])
        settings_layers = [s for s in layers if s.origin in configs and not s.invalid]
        return compose(agent_name, reason, layers, settings_layers, self.home, as_pi=as_pi,
                       fold_families=fold_families)


_AGENT_ORIGINS = frozenset({"agent", "project-agent"})
PI_READING_MARK = " [pi 20.7.3 reading]"


def _reading(scope: Scope, as_pi: bool) -> Scope:
    """`scope` as the reading asks; a scope loaded without pi's reading is read the same by both."""
    if as_pi and scope.pi_reading is not None:
        return scope.pi_reading
    return scope


def _signature(policy: Policy) -> tuple[object, ...]:
    """What decides a verdict and its provenance: the effective rules in order, as compiled."""
    return (policy.folds, *((r.surface, r.pattern, r.action, r.origin, r.layer, r.reason,
                             r.pattern_wildcard.expanded) for r in policy.effective_rules))
