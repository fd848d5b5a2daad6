"""The layered config of this node, loaded per agent, cached, and reloaded when files change.

The layers and their files are `core.rules.sources`; the rules file's knobs apply too, after the
global and project ones; agent files never set knobs.

The agent name arrives from the child and is untrusted (`core.rules.agent_names`): a name that
could escape the agents folder, or that names nobody, loads no agent file and marks the policy
suspicious. Composed policies (`core.rules.layers`) are kept in an LRU of `MAX_CACHED_POLICIES`
names; a name without agent files shares the agent-neutral policy's compiled rules, so thousands
of names cost little.

Reloads go through a gate (`core.rules.reloads`): a changed file that only narrows is applied, one
that widens is held as a `PendingReload` until `accept()` (or applied at once, logged, with
`accept_widening=True`). Files present when the store was created are trusted as they are; one
created or changed later is compared against an empty file when it is first read.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TypeVar

from core.rules.accepted import AcceptedRecord, Recorded
from core.rules.agent_names import suspicious_agent_reason
from core.rules.bounded_read import read_config_text
from core.rules.layers import Layers
from core.rules.model import ConfigError
from core.rules.policy import Policy
from core.rules.reloads import PendingReload, gated_changes
from core.rules.scopes import FileSignature, Scope, agent_scope_from_text, config_scope_from_text
from core.rules.sources import (
    AGENT_ORIGINS,
    PiOnlyFiles,
    ScopeKey,
    Sources,
    load_scope,
    reading,
)

log = logging.getLogger("pi_authorizer.rules")
#: Composed policies kept (least recently used names are dropped and recomposed on demand).
MAX_CACHED_POLICIES = 256
#: Results kept by `remembered` (each dropped when any file is applied).
MAX_REMEMBERED = 256
T = TypeVar("T")


class PolicyStore:
    """Loads scopes once, composes one policy per agent name, and gates reloads of changed files.

    Thread-safe: work over every agent file (a whole-session grant's refusal check composes one
    policy per agent) runs off the event loop while serving judges on it; each call holds the
    store's lock only for itself, so judging waits at most one composition."""

    def __init__(
        self,
        agent_dir: Path,
        project_dir: Path | None = None,
        rules_file: Path | None = None,
        *,
        home: str | None = None,
        accept_widening: bool = False,
        accepted: Path | None = None,
    ) -> None:
        """`accepted`: where the last accepted content of every file is kept across restarts
        (`core.rules.accepted`); without it the files present at start are trusted as they are."""
        self.agent_dir = agent_dir
        self.project_dir = project_dir
        self.rules_file = rules_file
        self.sources = Sources(agent_dir, project_dir, rules_file)
        self.home = home if home is not None else str(Path.home())
        self._layers = Layers(self.sources, self._scope, self.home)
        self.accept_widening = accept_widening
        self._scopes: dict[ScopeKey, Scope] = {}
        self._pi_only = PiOnlyFiles(MAX_CACHED_POLICIES)
        self._policies: OrderedDict[str, Policy] = OrderedDict()
        self._neutral: Policy | None = None
        self._pending: dict[ScopeKey, PendingReload] = {}
        self._listeners: list[Callable[[PendingReload], None]] = []
        self._lock = threading.RLock()
        #: Bumped whenever a file's new version is applied: what was derived from the old one is stale.
        self.generation = 0
        #: Bumped at each policy composed (which may drop the least recently used one): while it and
        #: `generation` stay, `policy(name)` returns the very policy it returned last for `name`.
        self.composed = 0
        self._remembered: OrderedDict[Hashable, object] = OrderedDict()
        # The files as they are now are what the person started this node with, unless a record of
        # what was last accepted says otherwise (`core.rules.accepted`).
        self._trusted = {path: FileSignature.of(path)
                         for path in (*self.sources.config_paths().values(), *self.sources.agent_files())}
        self._record = AcceptedRecord(accepted) if accepted is not None else None
        #: What this node watches: a file of these (or in these agents folders) created while it was
        #: stopped is gated at the next start; a path no start watched is trusted as it is.
        self._watched = {str(path) for path in self.sources.config_paths().values()}
        self._watched |= {str(folder) for folder in self._agent_folders()}
        self._starting = True
        self._held_at_start: list[PendingReload] = []
        #: path → the text last accepted (recorded); `_baseline`: what a file changed since is gated against.
        self._accepted: dict[str, str] = {}
        self._baseline: dict[Path, str] = {}
        if self._record is not None:
            self._compare_with_record(self._record.load())
        for origin, path in self.sources.config_paths().items():
            self._scope(origin, path, agent_file=False)
        self._starting = False
        self._save_record()

    # -- the record of what was accepted (across restarts) ---------------------------------------

    def _agent_folders(self) -> set[Path]:
        folders = {self.agent_dir / "agents"}
        if self.project_dir is not None:
            folders.add(self.project_dir / ".pi" / "agents")
        return folders

    def _compare_with_record(self, previous: Recorded | None) -> None:
        """Trust a file only when it holds the text last accepted; gate one changed since against
        that text, and one created since in a place the record watched against an empty file. A
        path no earlier start watched is trusted as it is (as at a first start)."""
        agent_folders = self._agent_folders()
        recorded = {Path(p) for p in (previous.texts if previous is not None else {})
                    if Path(p).parent in agent_folders or Path(p) in self._trusted}
        for path in sorted(set(self._trusted) | recorded):
            now = _text_now(path)
            before = None if previous is None else previous.texts.get(str(path))
            if previous is None or not previous.knows(path) or (before is not None and before == now):
                if now is not None:
                    self._accepted[str(path)] = now
                continue
            self._trusted.pop(path, None)  # gated when first read (`_scope`)
            if before is not None:
                self._accepted[str(path)] = before
                self._baseline[path] = before

    def _save_record(self) -> None:
        if self._record is not None:
            self._record.save(self._accepted, self._watched)

    def _accepted_now(self, key: ScopeKey, scope: Scope) -> None:
        """`scope` is in force for its file now: record its text."""
        path = str(key[1])
        if scope.text is not None:
            self._accepted[path] = scope.text
        elif not scope.signature.exists:
            self._accepted.pop(path, None)
        else:
            return
        self._save_record()

    def held_at_start(self) -> tuple[PendingReload, ...]:
        """The changes held when this store was made: files changed since they were last accepted."""
        return tuple(self._held_at_start)

    # -- policies --------------------------------------------------------------------------------

    def policy(self, agent_name: str) -> Policy:
        """The composed policy for `agent_name` (cached until a source file changes)."""
        with self._lock:
            cached = self._policies.get(agent_name)  # `_policy`'s first step, in place: every ask
            if cached is not None:
                self._policies.move_to_end(agent_name)
                return cached
            return self._policy(agent_name)

    def remembered(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`, kept under `key` until a file's new version is applied (at most
        `MAX_REMEMBERED` kept): for work over every agent file that the same ask repeats (the
        grant refusal check, then the same check when the grant is recorded). Computed outside
        the lock (it calls `policy` many times)."""
        with self._lock:
            generation = self.generation
            if key in self._remembered:
                self._remembered.move_to_end(key)
                return self._remembered[key]  # type: ignore[return-value]
        value = compute()
        with self._lock:
            if self.generation == generation:
                self._remembered[key] = value
                if len(self._remembered) > MAX_REMEMBERED:
                    self._remembered.popitem(last=False)
        return value

    def _policy(self, agent_name: str) -> Policy:
        cached = self._policies.get(agent_name)
        if cached is not None:
            self._policies.move_to_end(agent_name)
            return cached
        self.composed += 1
        composed = self._compose(agent_name)
        self._policies[agent_name] = composed
        if len(self._policies) > MAX_CACHED_POLICIES:
            evicted, _ = self._policies.popitem(last=False)
            self._drop_missing_agent_scopes(self.sources.agent_paths(evicted))
        return composed

    def cached_policies(self) -> int:
        """How many composed policies are held (bounded by `MAX_CACHED_POLICIES`)."""
        return len(self._policies)

    def known_agents(self) -> tuple[str, ...]:
        """Agents with an agent file in either agents folder (usable names only, sorted, at most
        `MAX_AGENT_FILES` per folder): whose scopes a whole-session grant must not override."""
        return tuple(sorted({path.name.removesuffix(".md") for path in self.sources.agent_files()}))

    def watched_paths(self) -> tuple[Path, ...]:
        """Every file a cached policy was (or would be) built from; a watcher should watch their
        parent folders too, since a file that does not exist yet may be created."""
        with self._lock:
            paths = {path for _, path in self._scopes} | set(self.sources.config_paths().values())
            paths |= self._pi_only.paths()
        return tuple(sorted(paths))

    # -- the reload gate ---------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[PendingReload], None]) -> None:
        """Called with each reload that is held because it widens."""
        self._listeners.append(listener)

    def pending(self) -> tuple[PendingReload, ...]:
        """Changed files held back because they widen a permission, oldest first."""
        return tuple(self._pending.values())

    def accept(self, pending: PendingReload) -> bool:
        with self._lock:
            return self._accept(pending)

    def _accept(self, pending: PendingReload) -> bool:
        """Apply the reviewed version (exactly the one whose diff was shown); False if superseded."""
        key = (pending.origin, Path(pending.path))
        if self._pending.get(key) is not pending:
            return False
        del self._pending[key]
        self._apply(key, pending.new)
        log.warning("config change to %s accepted: %s", pending.path, "; ".join(pending.diff_lines()))
        return True

    def unapplied_change(self, path: Path) -> str | None:
        with self._lock:
            return self._unapplied_change(path)

    def _unapplied_change(self, path: Path) -> str | None:
        """Why the config file `path` does not hold exactly the rules in force (a change to it held
        for review, or declined), or None. A rule from an ask is written only into a file that
        does: its diff then shows everything confirming applies (issue 20 finding 1)."""
        for key in [k for k in self._scopes if k[1] == path and k[0] not in AGENT_ORIGINS]:
            if key in self._pending:
                return (f"{path} holds a change not in force (held for review because it widens): "
                        "review that change first")
            applied, fresh = self._scopes[key], load_scope(key, agent_file=False)
            if _content(applied) != _content(fresh) or (
                    _content(reading(applied, True)) != _content(reading(fresh, True))):
                return (f"{path} holds a change not in force (a widening declined or not yet reviewed): "
                        "writing a rule into it would apply that change too; edit it by hand")
        return None

    def apply_written(self, path: Path, text: str) -> None:
        with self._lock:
            self._apply_written(path, text)

    def _apply_written(self, path: Path, text: str) -> None:
        """Apply `text`, which this node just wrote into the config file `path` after a person
        confirmed its diff: exactly that text, never a re-read of the path (a file swapped in right
        after the write is a change like any other, gated at the next reload)."""
        for key in [k for k in self._scopes if k[1] == path and k[0] not in AGENT_ORIGINS]:
            # A signature no file has: the next reload reads the file and gates it against `text`.
            stale = FileSignature(str(path), True, -1, -1, -1)
            ours = config_scope_from_text(text, path, key[0], stale)
            pi = config_scope_from_text(text, path, key[0], stale, as_pi=True)
            self._pending.pop(key, None)
            self._apply(key, dataclasses.replace(ours, pi_reading=pi))

    def as_if_written(self, path: Path, text: str) -> PolicyStore:
        """A what-if twin of this store with `text` applied to the config file `path` (as
        `apply_written` would), this store untouched: what a rule's dialog shows it would decide."""
        twin = copy.copy(self)
        twin._scopes = dict(self._scopes)
        twin._pending = dict(self._pending)
        twin._policies = OrderedDict()
        twin._neutral = None
        twin._listeners = []
        twin._record = None  # a what-if is never recorded as accepted
        twin._accepted = dict(self._accepted)
        twin._baseline = dict(self._baseline)
        twin._layers = Layers(twin.sources, twin._scope, twin.home)
        twin.apply_written(path, text)
        return twin

    def decline(self, pending: PendingReload) -> bool:
        with self._lock:
            return self._decline(pending)

    def _decline(self, pending: PendingReload) -> bool:
        """Keep the applied version; the file is proposed again only when it changes again."""
        key = (pending.origin, Path(pending.path))
        if self._pending.get(key) is not pending:
            return False
        del self._pending[key]
        return True

    def reload_if_changed(self) -> bool:
        with self._lock:
            return self._reload_if_changed()

    def _reload_if_changed(self) -> bool:
        """Re-read every file whose signature changed: apply narrowing changes, hold widening ones.
        True when anything was applied."""
        for origin, path in self.sources.config_paths().items():
            self._scope(origin, path, agent_file=False)  # a config file first read now is gated too
        stale = [(key, scope) for key, scope in self._scopes.items()
                 if FileSignature.of(key[1]) != scope.signature]
        applied = False
        if self._pi_only.forget_changed():  # read by pi's reading alone: a change only tightens a verdict
            self._changed()
            applied = True
        for key, scope in stale:
            self._pending.pop(key, None)
            applied |= self._offer(key, scope, load_scope(key, agent_file=scope.origin in AGENT_ORIGINS))
        return applied

    def _offer(self, key: ScopeKey, applied: Scope, fresh: Scope) -> bool:
        """Gate one changed file: True when `fresh` was applied."""
        changes = gated_changes(key, applied, fresh, self._scopes)
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

    def _apply(self, key: ScopeKey, scope: Scope) -> None:
        self._scopes[key] = scope
        self._accepted_now(key, scope)
        self._changed()
        self._neutral = None
        self._drop_missing_agent_scopes([k for k in self._scopes if k[0] in AGENT_ORIGINS])

    def _changed(self) -> None:
        self._policies.clear()
        self._remembered.clear()
        self.generation += 1

    def _drop_missing_agent_scopes(self, keys: list[ScopeKey]) -> None:
        """Forget "no agent file" scopes no cached policy uses, so the scopes (and the paths
        re-checked on every reload) stay bounded by the cache, whatever names children send."""
        for key in keys:
            scope = self._scopes.get(key)
            if scope is not None and not scope.signature.exists and key not in self._pending:
                del self._scopes[key]

    # -- loading -----------------------------------------------------------------------------------

    def _scope(self, origin: str, path: Path, *, agent_file: bool) -> Scope:
        """Our reading of one file; pi's reading of the same version is its `pi_reading`."""
        key = (origin, path)
        scope = self._scopes.get(key)
        if scope is not None:
            return scope
        fresh = load_scope(key, agent_file=agent_file)
        before = self._baseline.pop(path, None)
        if before is not None:
            # Changed since it was last accepted (while this node was not running): gated against
            # the accepted text, as a change while running is.
            stale = FileSignature(str(path), True, -1, -1, -1)
            accepted = _scope_from_text(key, before, stale, agent_file=agent_file)
            self._scopes[key] = accepted
            if not self._offer(key, accepted, fresh):
                self._held_at_start += [p for k, p in self._pending.items() if k == key]
            return self._scopes[key]
        if not fresh.signature.exists or self._trusted.get(path) == fresh.signature:
            self._scopes[key] = fresh
            if fresh.signature.exists:
                self._accepted_now(key, fresh)
            return fresh
        # A file created or changed since this store started, read for the first time: gate it
        # (both readings) like a reload of an empty file.
        empty = Scope(origin, FileSignature(str(path), False))
        self._scopes[key] = dataclasses.replace(empty, pi_reading=empty)
        if not self._offer(key, self._scopes[key], fresh) and self._starting:
            self._held_at_start += [p for k, p in self._pending.items() if k == key]
        return self._scopes[key]

    def _neutral_policy(self) -> Policy:
        """Global, project and rules-file layers only: the policy of every name without agent files
        (both readings)."""
        if self._neutral is None:
            self._neutral = self._layers.both("", None, include_agent_files=False)
        return self._neutral

    def _compose(self, agent_name: str) -> Policy:
        """This node's reading, with pi 20.7.3's reading attached (`pi_differs` when it composes
        differently)."""
        reason = suspicious_agent_reason(agent_name)
        if reason is None and self._has_agent_file(agent_name):
            return self._layers.both(agent_name, None, include_agent_files=True)
        pi_only = [self._pi_only.scope(o, p) for o, p in self.sources.pi_agent_paths(agent_name)] \
            if reason is not None else []
        if any(scope.signature.exists for scope in pi_only):
            # pi opens `<name>.md` for any non-empty name (`unknown`, a tab, a zero-width joiner,
            # `sub/x`), so its reading loads the file and its denies and asks still hold; ours
            # never uses a suspicious name as a file name, so its allows never do. Such a file
            # is read in pi's reading only, past the reload gate: it can only tighten a verdict.
            ours = self._layers.compose(agent_name, reason, include_agent_files=False, as_pi=False)
            return self._layers.with_pi(ours, agent_name, reason, include_agent_files=True,
                                        agent_scopes=pi_only)
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
                   for origin, path in self.sources.agent_paths(agent_name))


def _text_now(path: Path) -> str | None:
    """The file's text now, or None when it is missing or cannot be read."""
    try:
        return read_config_text(path)
    except (OSError, ValueError):
        return None


def _scope_from_text(key: ScopeKey, text: str, signature: FileSignature, *, agent_file: bool) -> Scope:
    """Both readings of a file's recorded text."""
    origin, path = key
    read = agent_scope_from_text if agent_file else config_scope_from_text
    try:
        ours, pi = (read(text, path, origin, signature, as_pi=as_pi) for as_pi in (False, True))
    except RecursionError:
        return Scope(origin, signature, errors=(ConfigError(str(path), "(file)", "nested too deeply"),))
    return dataclasses.replace(ours, pi_reading=pi)


def _content(scope: Scope) -> tuple[object, ...]:
    """What a file says (its rules, knobs and errors), not when it was read."""
    return (scope.permission, scope.knobs, tuple(e.reason for e in scope.errors))
