"""The value types every rules module shares: actions, compiled rules, surfaces, config errors."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from core.rules.matcher import Wildcard, compile_wildcard

Action = Literal["allow", "deny", "ask"]
#: One step of a judgment's trail (what was consulted and what it said), as `explain` shows it.
Step = dict[str, object]
ACTIONS: tuple[Action, ...] = ("allow", "deny", "ask")

# deny > ask > allow; the lower the rank the more restrictive.
_RESTRICTIVENESS: dict[Action, int] = {"deny": 0, "ask": 1, "allow": 2}

FAMILIES: dict[str, tuple[str, str]] = {
    "path": ("path_read", "path_write"),
    "external_directory": ("external_directory_read", "external_directory_write"),
}
DIRECTIONAL_SURFACES = frozenset(member for pair in FAMILIES.values() for member in pair)
PATH_TOOLS = frozenset({"read", "write", "edit", "find", "grep", "ls"})
PATH_SURFACES = PATH_TOOLS | FAMILIES.keys() | DIRECTIONAL_SURFACES
MCP_BASELINE_TARGETS = ("mcp_status", "mcp_list", "mcp_search", "mcp_describe", "mcp_connect")


def more_restrictive(a: Action, b: Action) -> bool:
    """True when `a` is strictly more restrictive than `b` (ties keep the earlier one)."""
    return _RESTRICTIVENESS[a] < _RESTRICTIVENESS[b]


def family_members(surface: str) -> tuple[str, ...]:
    """The directional members a surface stands for: itself, or both members of a bare family."""
    return FAMILIES.get(surface, (surface,))


@dataclass(frozen=True, slots=True)
class Rule:
    """One composed rule. `origin` is the scope (or rewrite) it answers for; `layer` its kind."""

    surface: str
    pattern: str
    action: Action
    origin: str
    layer: str
    reason: str | None
    source: str | None
    surface_wildcard: Wildcard
    pattern_wildcard: Wildcard
    rewritten_from: str | None = None

    def rewrite(self, action: Action, origin: str) -> Rule:
        """The same rule with a new action and origin, remembering what it was."""
        return replace(self, action=action, origin=origin, rewritten_from=f"{self.action}@{self.origin}")

    def to_json(self) -> dict[str, object]:
        """Plain-data view for trails and the explain command."""
        data: dict[str, object] = {
            "surface": self.surface,
            "pattern": self.pattern,
            "action": self.action,
            "origin": self.origin,
            "layer": self.layer,
            "source": self.source,
        }
        if self.reason is not None:
            data["reason"] = self.reason
        if self.rewritten_from is not None:
            data["rewrittenFrom"] = self.rewritten_from
        return data


def make_rule(
    surface: str,
    pattern: str,
    action: Action,
    *,
    origin: str,
    layer: str,
    home: str,
    reason: str | None = None,
    source: str | None = None,
    brace_home: bool = True,
    utf16: bool = False,
    pi_surface: bool = False,
) -> Rule:
    """Build a rule with both sides compiled once (the pattern home-expanded, the surface not).

    `pi_surface` compiles the surface key as pi 20.7.3 does, through the same wildcard compiler as
    a pattern: home-expanded (a key `~` meets the surface `<home>`) and on UTF-16 units.
    """
    return Rule(
        surface=surface,
        pattern=pattern,
        action=action,
        origin=origin,
        layer=layer,
        reason=reason,
        source=source,
        surface_wildcard=(compile_wildcard(surface, home, brace_home=False, utf16=True) if pi_surface
                          else compile_wildcard(surface)),
        pattern_wildcard=compile_wildcard(pattern, home, brace_home=brace_home, utf16=utf16),
    )


@dataclass(frozen=True, slots=True)
class ConfigError:
    """A problem with one config file: which file, which key, and why."""

    path: str
    key: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """Plain-data view (`configErrors` in the explain JSON)."""
        return {"path": self.path, "key": self.key, "reason": self.reason}

    def __str__(self) -> str:
        return f"{self.path}: {self.key}: {self.reason}"
