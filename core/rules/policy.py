"""A composed, compiled policy for one agent: the rules in evaluation order plus the knobs.

Composition follows `docs/design/contract.md` § Rules: `[default */*] + [mcp baseline] + [config rules in
merged key order]`; session rules are appended by the resolver at check time. A present-but-invalid
non-global scope floors every `allow` to `ask` (origin `fail-closed`); yolo then rewrites every
`ask` to `allow` (origin `yolo`), leaving `deny` alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from core.rules.evaluate import Candidates
from core.rules.model import (
    DIRECTIONAL_SURFACES,
    FAMILIES,
    MCP_BASELINE_TARGETS,
    Action,
    ConfigError,
    Rule,
    family_members,
    make_rule,
)
from core.rules.pi_reading import js_key_order
from core.rules.scopes import FileSignature, Permission, Scope, expand_families
from core.rules.settings import Settings

if TYPE_CHECKING:
    from core.rules.compiled import Compiled

GLOBAL = "global"
#: Compiled readings kept per policy (one per tuple of session rules in use).
MAX_COMPILED = 64


@dataclass(frozen=True)
class Policy:
    """What this node's recorded authority says, for one (possibly suspicious) agent name.

    Its caches (candidates by surface, `others`, `pi_differs_on`) fill on first use from any thread
    without a lock: each entry is a pure function of the policy, so two threads filling one at once
    store equal values."""

    agent_name: str
    suspicious_agent_reason: str | None
    rules: tuple[Rule, ...]
    effective_rules: tuple[Rule, ...]
    settings: Settings
    errors: tuple[ConfigError, ...]
    fail_closed_scopes: tuple[str, ...]
    sources: tuple[FileSignature, ...]
    home: str
    # pi 20.7.3's own reading of the same files (`core.rules.pi_reading`), and whether it composes
    # into other rules; the resolver consults it then (or for a value beyond the BMP) and keeps
    # the more restrictive of the two verdicts.
    pi_reading: Policy | None = field(default=None, repr=False, compare=False)
    pi_differs: bool = field(default=False, repr=False, compare=False)
    # pi's reading of the files composed with the family fold, for asks on a directional surface
    # (which 20.7.3 never makes): the files read as pi reads them, judged by the newer semantics.
    pi_directional: Policy | None = field(default=None, repr=False, compare=False)
    # False for pi 20.7.3's reading of files with directional keys (`path_read`, ...): 20.7.3 has
    # no families, so a `path` ask meets the `path` rules only.
    folds: bool = True
    # The same reading composed without pi-authorizer's own `--rules` layer (built on first use):
    # an allow of that layer never overrides a deny of the others (`core.rules.judge`).
    without_authorizer: Callable[[], Policy] | None = field(default=None, repr=False, compare=False)
    _others: list[Policy] = field(default_factory=list, repr=False, compare=False)
    _by_surface: dict[str, Candidates] = field(default_factory=dict, repr=False, compare=False)
    _pi_differs_on: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)
    # This very policy's `Compiled` readings by session rules (never shared with a copy: `init=False`).
    _compiled: dict[int, Compiled] = field(default_factory=dict, init=False, repr=False, compare=False)

    def candidates(self, surface: str) -> Candidates:
        """The effective rules whose surface side matches `surface`, in position order (cached)."""
        cached = self._by_surface.get(surface)
        if cached is None:
            cached = Candidates([r for r in self.effective_rules if r.surface_wildcard.matches(surface)])
            _bounded(self._by_surface)[surface] = cached
        return cached

    def compiled(self, session: tuple[Rule, ...]) -> Compiled:
        """This policy with these very session rules, compiled for plain asks (`core.rules.compiled`),
        built on first use and kept beside the policy (at most `MAX_COMPILED`: grants change)."""
        found = self._compiled.get(id(session))
        if found is None or found.session is not session:
            from core.rules.compiled import Compiled  # it judges by `core.rules.judge`, which needs Policy

            if len(self._compiled) >= MAX_COMPILED:
                self._compiled.clear()
            found = self._compiled[id(session)] = Compiled(self, session)
        return found

    def others(self) -> Policy | None:
        """This reading without the `--rules` layer, or None when there is no such layer."""
        if self.without_authorizer is None:
            return None
        if not self._others:
            self._others.append(self.without_authorizer())
        return self._others[0]

    def pi_differs_on(self, surface: str) -> bool:
        """pi's reading judges an ask on `surface` by other rules than this reading (cached)."""
        cached = self._pi_differs_on.get(surface)
        if cached is None:
            pi = self.pi_directional if surface in DIRECTIONAL_SURFACES else self.pi_reading
            if pi is None or not self.pi_differs:
                cached = False
            elif pi.folds != self.folds and surface in FAMILIES:
                cached = True
            else:
                cached = any(_signature(self.candidates(m)) != _signature(pi.candidates(m))
                             for m in family_members(surface))
            _bounded(self._pi_differs_on)[surface] = cached
        return cached


_T = TypeVar("_T")

#: Surfaces a policy remembers its candidates for (`Policy.candidates`, `pi_differs_on`): a child names
#: the surface, so a flood of new ones must not grow them until the next reload (review4 finding 2).
MAX_SURFACES = 1024


def _bounded(cache: dict[str, _T]) -> dict[str, _T]:
    """`cache`, emptied first when it holds `MAX_SURFACES` (a child's flood of surfaces; the real
    ones are a handful, found again at once)."""
    if len(cache) >= MAX_SURFACES:
        cache.clear()
    return cache


def _signature(candidates: Candidates) -> tuple[object, ...]:
    return tuple((r.surface, r.pattern, r.action, r.origin, r.layer, r.reason, r.pattern_wildcard.expanded,
                  r.surface_wildcard.expanded) for r in candidates.rules)


def merge_permission(base: Permission, override: Permission) -> Permission:
    """Deep-shallow merge: two maps merge by pattern, anything else replaces the surface whole.

    Python dict assignment gives the contract's positions for free: an overriding key keeps its
    original position, a new key is appended.
    """
    merged = dict(base)
    for surface, value in override.items():
        previous = merged.get(surface)
        if previous is not None and previous.is_map and value.is_map:
            merged[surface] = type(value)(True, {**previous.patterns, **value.patterns})
        else:
            merged[surface] = value
    return merged


def compose(
    agent_name: str,
    suspicious_reason: str | None,
    scopes: Sequence[Scope],
    settings_scopes: Sequence[Scope],
    home: str,
    *,
    as_pi: bool = False,
    fold_families: bool = False,
) -> Policy:
    """Merge `scopes` (lowest first) into a compiled policy.

    `as_pi` composes as pi 20.7.3 does: JavaScript key order, no `${HOME}`, `?` on UTF-16 units,
    no fail-closed floor.
    """
    permission: Permission = {}
    for scope in scopes:
        permission = merge_permission(permission, scope.permission)
    folds = True
    if as_pi:
        # 20.7.3 knows no families: a `path` ask meets the rules whose surface matches `path`
        # (`path`, `pa*`, `*`), in their own places. `fold_families` composes pi's reading of the
        # files with the newer family fold instead (for asks on a directional surface).
        folds = fold_families
        if folds:
            permission = expand_families(permission)
        permission = {surface: type(value)(value.is_map, js_key_order(value.patterns))
                      for surface, value in js_key_order(permission).items()}
    rules = _rules(permission, home, pi=as_pi)
    fail_closed = () if as_pi else tuple(s.origin for s in scopes if s.invalid and s.origin != GLOBAL)
    if fail_closed:
        rules = tuple(r.rewrite("ask", "fail-closed") if r.action == "allow" else r for r in rules)
    settings = Settings.merged(((s.origin, s.knobs) for s in settings_scopes), as_pi=as_pi)
    effective = rules
    if settings.yolo_mode:
        effective = tuple(r.rewrite("allow", "yolo") if r.action == "ask" else r for r in rules)
    return Policy(
        agent_name=agent_name,
        suspicious_agent_reason=suspicious_reason,
        rules=rules,
        effective_rules=effective,
        settings=settings,
        errors=tuple(e for s in scopes for e in s.errors),
        fail_closed_scopes=fail_closed,
        sources=tuple(s.signature for s in scopes),
        home=home,
        folds=folds,
    )


def _rules(permission: Permission, home: str, *, pi: bool) -> tuple[Rule, ...]:
    universal = permission.get("*")
    default_action: Action = "ask"
    default_origin, default_source = "builtin", None
    if universal is not None and not universal.is_map:
        entry = universal.patterns["*"]
        default_action, default_origin, default_source = entry.action, entry.origin, entry.source
    elif universal is not None and "*" in universal.patterns:
        # A map is no fallback state (the default stays `ask`), but pi credits the scope that
        # wrote its `"*"` pattern as the default's origin.
        default_origin = universal.patterns["*"].origin
    default = make_rule(
        "*", "*", default_action, origin=default_origin, layer="default", home=home,
        source=default_source,
    )
    config = [
        make_rule(
            surface, pattern, entry.action, origin=entry.origin, layer="config", home=home,
            reason=entry.reason, source=entry.source, brace_home=not pi, utf16=pi, pi_surface=pi,
        )
        for surface, value in permission.items()
        if surface != "*"
        for pattern, entry in value.patterns.items()
    ]
    baseline = []
    if any(r.surface == "mcp" and r.action == "allow" for r in config):
        baseline = [
            make_rule("mcp", target, "allow", origin="baseline", layer="baseline", home=home)
            for target in MCP_BASELINE_TARGETS
        ]
    return (default, *baseline, *config)
