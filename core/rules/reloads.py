"""What a changed config or agent file would change, and whether that widens any permission.

The trust model (docs/design/reliability.md): the files this node's rules come from can be written by
the very children it judges (the project layer and project agent files sit in their worktree, and
they run as the same user). So a reload that could widen a permission is never applied silently:
it is held as a `PendingReload` until a person accepts its diff (the app), or `serve` was started
with `--accept-widening-reloads`. A reload that only narrows (a new deny, a removed allow, a
stricter action) is applied at once.

"Widens" is decided per file and conservatively, on the file's own entries (which merge with the
other layers by surface and pattern): a new entry that is not `deny`; a removed `deny` or `ask`;
an action made less restrictive; a change of the order of a surface's patterns (last match wins);
a bare state replaced by a pattern map or the other way round (unless the new value is a bare
`deny`); a removed bare state; `yoloMode` turned on or a `yoloMode: false` removed; an invalid
project or agent file becoming valid (its fail-closed floor lifts). A file that becomes invalid
contributes nothing, so its denies count as removed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.rules.model import FAMILIES, more_restrictive
from core.rules.policy import GLOBAL
from core.rules.scopes import Entry, Scope, SurfaceValue
from core.rules.sources import ScopeKey, reading

PI_READING_MARK = " [pi 20.7.3 reading]"
ChangeKind = Literal["added", "removed", "changed", "reordered", "replaced", "knob", "validity"]


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the applied and the changed version of a file."""

    kind: ChangeKind
    surface: str
    pattern: str | None
    before: str | None
    after: str | None
    widens: bool

    def describe(self) -> str:
        """One diff line: `+` added, `-` removed, `~` changed; `(widens)` marks what is held."""
        mark = {"added": "+", "removed": "-"}.get(self.kind, "~")
        where = self.surface if self.pattern is None else f"{self.surface} {self.pattern!r}"
        if self.kind == "added":
            what = f"{where}: {self.after}"
        elif self.kind == "removed":
            what = f"{where}: {self.before}"
        else:
            what = f"{where}: {self.before} -> {self.after}"
        return f"{mark} {what}" + ("  (widens)" if self.widens else "")


@dataclass(frozen=True)
class PendingReload:
    """A changed file held back because it widens; `new` is what accepting it applies."""

    origin: str
    path: str
    old: Scope
    new: Scope
    changes: tuple[Change, ...]

    def diff_lines(self) -> list[str]:
        """The diff a person reviews (widening lines marked), then the new file's config errors."""
        lines = [c.describe() for c in self.changes]
        lines += [f"config error: {e}" for e in self.new.errors]
        return lines


def scope_changes(
    old: Scope, new: Scope, *, floors: bool, bare_elsewhere: frozenset[str] = frozenset()
) -> tuple[Change, ...]:
    """Every change from `old` to `new` (same file); `floors` when an invalid file floors allows;
    `bare_elsewhere`: surfaces another file sets as a bare state, which a map in this file
    replaces whole when it is above it (so adding or removing such a map always widens)."""
    changes: list[Change] = []
    if floors and old.invalid != new.invalid:
        changes.append(Change("validity", "(file)", None, _validity(old), _validity(new),
                              widens=old.invalid))
    elif old.invalid != new.invalid:
        changes.append(Change("validity", "(file)", None, _validity(old), _validity(new), widens=False))
    changes += _knob_changes(old.knobs if not old.invalid else {}, new.knobs if not new.invalid else {})
    before, after = old.permission, new.permission
    for surface in dict.fromkeys([*before, *after]):
        found = _surface_changes(surface, before.get(surface), after.get(surface), surface in bare_elsewhere)
        if surface in FAMILIES:
            # A bare family key (`path`, `external_directory`) is folded onto both directional members
            # in pi's reading, where it can reorder another file's patterns: removing or changing one
            # can loosen a verdict that no single pattern names. Only an added deny is safe.
            found = [c if c.kind == "added" and c.after == "deny" else dataclasses.replace(c, widens=True)
                     for c in found]
        changes += found
    return tuple(changes)


def _validity(scope: Scope) -> str:
    return "invalid (contributes nothing)" if scope.invalid else "valid"


def _knob_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    changes = []
    for key in dict.fromkeys([*old, *new]):
        if old.get(key) != new.get(key):
            widens = key == "yoloMode" and new.get(key) is not False
            changes.append(Change("knob", key, None, _json(old, key), _json(new, key), widens))
    return changes


def _json(knobs: Mapping[str, Any], key: str) -> str:
    return repr(knobs[key]) if key in knobs else "(unset)"


def _surface_changes(
    surface: str, old: SurfaceValue | None, new: SurfaceValue | None, bare_elsewhere: bool
) -> list[Change]:
    replacing = bare_elsewhere and (new.is_map if new is not None else old is not None and old.is_map)
    if replacing and (old is None) != (new is None):
        # A map above another file's bare state replaces it whole (even an empty map).
        return [Change("replaced", surface, None, _shape(old) if old else "(unset)",
                       _shape(new) if new else "(unset)", widens=True)]
    if old is None and new is not None:
        return [_added(surface, pattern, entry, bare=not new.is_map)
                for pattern, entry in new.patterns.items()]
    if new is None and old is not None:
        return [Change("removed", surface, pattern if old.is_map else None, _action(entry), None,
                       widens=not old.is_map or entry.action != "allow")
                for pattern, entry in old.patterns.items()]
    assert old is not None and new is not None
    if old.is_map != new.is_map:
        bare_deny = not new.is_map and new.patterns["*"].action == "deny"
        return [Change("replaced", surface, None, _shape(old), _shape(new), widens=not bare_deny)]
    changes: list[Change] = []
    common = [p for p in old.patterns if p in new.patterns]
    if common != [p for p in new.patterns if p in old.patterns]:
        changes.append(Change("reordered", surface, None, ", ".join(map(repr, common)),
                              ", ".join(repr(p) for p in new.patterns if p in old.patterns), widens=True))
    for pattern, entry in old.patterns.items():
        updated = new.patterns.get(pattern)
        shown = pattern if new.is_map else None
        if updated is None:
            changes.append(Change("removed", surface, shown, _action(entry), None,
                                  widens=entry.action != "allow"))
        elif (updated.action, updated.reason) != (entry.action, entry.reason):
            changes.append(Change("changed", surface, shown, _action(entry), _action(updated),
                                  widens=more_restrictive(entry.action, updated.action)))
    changes += [_added(surface, p, e, bare=False) for p, e in new.patterns.items() if p not in old.patterns]
    return changes


def _added(surface: str, pattern: str, entry: Entry, *, bare: bool) -> Change:
    # A bare state replaces every lower layer's patterns for the surface: only a bare deny is safe.
    return Change("added", surface, None if bare else pattern, None, _action(entry),
                  widens=entry.action != "deny")


def _action(entry: Entry) -> str:
    return f"deny ({entry.reason})" if entry.reason else entry.action


def _shape(value: SurfaceValue) -> str:
    if not value.is_map:
        return f"bare {value.patterns['*'].action}"
    return "{" + ", ".join(f"{p!r}: {e.action}" for p, e in value.patterns.items()) + "}"



def gated_changes(key: ScopeKey, applied: Scope, fresh: Scope,
                  scopes: Mapping[ScopeKey, Scope]) -> tuple[Change, ...]:
    """What changing `key` from `applied` to `fresh` changes, among the other applied `scopes`.

    pi 20.7.3's reading of the same file is gated too: a change that widens only as pi reads it
    is held like any other (the diff marks those lines with `PI_READING_MARK`).
    """
    changes = _reading_changes(key, applied, fresh, scopes, as_pi=False)
    seen = set(changes)
    return changes + tuple(
        dataclasses.replace(change, surface=change.surface + PI_READING_MARK)
        for change in _reading_changes(key, applied, fresh, scopes, as_pi=True) if change not in seen
    )


def _reading_changes(key: ScopeKey, applied: Scope, fresh: Scope, scopes: Mapping[ScopeKey, Scope],
                     *, as_pi: bool) -> tuple[Change, ...]:
    before, after = reading(applied, as_pi), reading(fresh, as_pi)
    if as_pi and before is applied and after is fresh:
        return ()
    bare = frozenset(surface for other, scope in scopes.items() if other != key
                     for surface, value in reading(scope, as_pi).permission.items()
                     if not value.is_map)
    return scope_changes(before, after, floors=key[0] != GLOBAL, bare_elsewhere=bare)
