"""How pi 20.7.3 itself reads the same files, where that differs from this node's own reading.

pi-authorizer judges every ask by its own reading of the config files and, when pi's reading of
those files composes into different rules, by pi's reading too, and keeps the more restrictive
verdict (see `docs/design/fidelity.md`). The differences live here, as facts about pi's loader:

- Object keys: JavaScript puts integer-like keys (`"0"`, `"42"`) before every other key of an
  object, in ascending order, so "last match wins" runs in that order.
- Agent frontmatter: only `---\\n` opens it (after CRLF is turned into LF) and the first `\\n---`
  closes it; each line splits at its first `:`; one quote is cut from each end of a key; a value
  loses its quotes only when both ends carry the same one; no escapes, no `# comment` stripping;
  a line's indentation is its leading JavaScript whitespace; a value that is not a state (or a
  `{action: deny}` map) is dropped, as is a map left empty.
- `${HOME}` is not a home form in 20.7.3 (only `~` and `$HOME`).
- `?` matches one UTF-16 unit (JavaScript regexes without the `u` flag), not one character.
- Any non-empty agent name is a file name to pi: `unknown`, a tab, a zero-width joiner, `sub/x`.
- A tool surface (not bash, skill, mcp or a path surface) is judged on `"*"`: pi builds the
  tool's input as `{}`, so the child's `matchValues` are not consulted; pi trims the tool's name
  (`"bash "` is a bash call without a command).
- There are no surface families: a `path` ask meets the rules whose surface matches `path` itself
  (`path`, `pa*`, `*`, not `*_*`), in their own places.
- A `__proto__` key is never an entry: assigning it sets the object's prototype (or does nothing),
  so such a surface or pattern is dropped (in config.json a map holding only it is an empty map,
  which still replaces a lower scope's bare state), and in the frontmatter a root `__proto__:`
  map is where `permission` is looked up when the root has none.
- Bytes that are not UTF-8 are read as U+FFFD (node's decoder), not refused
  (`core.rules.bounded_read.read_config_text(lenient=True)`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from core.rules.matcher import utf16_units
from core.rules.model import DIRECTIONAL_SURFACES
from core.rules.values import js_trim
from core.wire.facts import IntentFacts

_ARRAY_INDEX_LIMIT = 2**32 - 1
_PROTO = "__proto__"
_STATES = ("allow", "deny", "ask")
# Judged on the values as sent (`path-values`): 20.7.3's path surfaces and `mcp`'s candidates.
PATH_VALUE_SURFACES = frozenset({"read", "write", "edit", "find", "grep", "ls", "path",
                                  "external_directory", "mcp"})


def is_array_index(key: str) -> bool:
    """A key JavaScript orders first: the canonical decimal form of an integer below 2**32 - 1."""
    return key.isdigit() and key.isascii() and str(int(key)) == key and int(key) < _ARRAY_INDEX_LIMIT


def js_key_order(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """The mapping in JavaScript property order: array indices ascending, then the rest as given."""
    indices = sorted((k for k in mapping if is_array_index(k)), key=int)
    if not indices:
        return dict(mapping)
    return {**{k: mapping[k] for k in indices}, **{k: v for k, v in mapping.items() if k not in indices}}


def _trim_start(text: str) -> str:
    trimmed = js_trim(text + "x")
    return trimmed[:-1]


def extract_frontmatter_as_pi(markdown: str) -> str:
    """pi's frontmatter text: between a leading `---\\n` and the next `\\n---` (LF-normalised)."""
    normalized = markdown.replace("\r\n", "\n")
    if not normalized.startswith("---\n"):
        return ""
    end = normalized.find("\n---", 4)
    return "" if end < 0 else normalized[4:end]


class JsObject(dict[str, Any]):
    """A JavaScript object as pi's YAML reader builds it: its own entries, and the object a
    `__proto__` key was assigned (JavaScript's setter makes that the prototype, not an entry)."""

    proto: JsObject | None = None

    def lookup(self, key: str) -> Any:
        """`object[key]`: an own entry, else along the prototype chain."""
        found: JsObject | None = self
        while found is not None:
            if key in found:
                return found[key]
            found = found.proto
        return None


def parse_simple_yaml_as_pi(text: str) -> JsObject:
    """pi's minimal YAML map reader (key order kept as JavaScript would keep it)."""
    root = JsObject()
    stack: list[tuple[int, JsObject]] = [(-1, root)]
    for raw in text.replace("\r\n", "\n").split("\n"):
        if not js_trim(raw) or _trim_start(raw).startswith("#"):
            continue
        indent = len(raw) - len(_trim_start(raw))
        line = js_trim(raw)
        colon = line.find(":")
        if colon <= 0:
            continue
        key = js_trim(line[:colon])
        key = key[1:] if key[:1] in "'\"" and key else key
        key = key[:-1] if key[-1:] in "'\"" and key else key
        value = js_trim(line[colon + 1:])
        while len(stack) > 1 and indent <= stack[-1][0]:
            stack.pop()
        target = stack[-1][1]
        if not value:
            child = JsObject()
            if key == _PROTO:
                target.proto = child
            else:
                target[key] = child
            stack.append((indent, child))
            continue
        if len(value) >= 1 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if key != _PROTO:  # the setter ignores a string
            target[key] = value
    return root


def _deny_with_reason(value: object) -> bool:
    return (isinstance(value, dict) and value.get("action") == "deny"
            and isinstance(value.get("reason", ""), str))


def permission_as_pi(value: object) -> dict[str, Any] | None:
    """pi's `normalizeFlatPermissionValue`: keep states and deny maps, drop the rest and empties."""
    if not isinstance(value, dict):
        return None
    kept: dict[str, Any] = {}
    for surface, entry in js_key_order(value).items():
        if isinstance(entry, str):
            if entry in _STATES:
                kept[surface] = entry
        elif isinstance(entry, dict):
            patterns = {p: a for p, a in js_key_order(entry).items()
                        if (isinstance(a, str) and a in _STATES) or _deny_with_reason(a)}
            if patterns:
                kept[surface] = {p: ({"action": "deny", "reason": a.get("reason")}
                                     if isinstance(a, dict) else a) for p, a in patterns.items()}
    return kept or None


def without_proto_keys(permission: dict[str, Any]) -> dict[str, Any]:
    """A validated config.json `permission` block as pi's schema hands it on: every `__proto__`
    surface or pattern dropped (assigned, not defined), a map of only that left empty."""
    return {surface: ({p: a for p, a in value.items() if p != _PROTO} if isinstance(value, dict) else value)
            for surface, value in permission.items() if surface != _PROTO}


def read_permission_block_as_pi(markdown: str) -> dict[str, Any] | None:
    """The agent file's `permission` block exactly as pi 20.7.3 reads it, or None."""
    frontmatter = extract_frontmatter_as_pi(markdown)
    if not frontmatter:
        return None
    return permission_as_pi(parse_simple_yaml_as_pi(frontmatter).lookup("permission"))


def facts_as_pi(facts: IntentFacts) -> IntentFacts | None:
    """The facts pi 20.7.3 would judge: a tool surface's values are not consulted (`"*"`).

    A path surface or `mcp` is judged on the values as sent. Any other surface is a tool call
    whose input pi builds from the surface as sent (`bash` -> `{command}`, `skill` -> `{name}`,
    else `{}`) and whose name it then trims: `"bash "` is a bash call without a command (`""`),
    `" skill"` a skill without a name (`"*"`), `"mcp "` the targets `mcp_status`, `mcp`.
    None for a directional surface (`path_read`, ...): 20.7.3 children never ask on one, so
    there is no 20.7.3 meaning to follow.
    """
    surface = facts.surface
    if surface in DIRECTIONAL_SURFACES:
        return None
    if surface in PATH_VALUE_SURFACES or surface in ("bash", "skill"):
        return facts
    name = js_trim(surface)
    if name == "bash":
        return replace(facts, surface=name, match_values=("",))
    if name == "skill":
        return replace(facts, surface=name, match_values=("*",))
    if name == "mcp":
        return replace(facts, surface=name, match_values=("mcp_status", "mcp"))
    if name == surface and not facts.match_values:
        return facts
    return replace(facts, surface=name, match_values=())


def beyond_bmp(facts: IntentFacts) -> bool:
    """The surface or some value holds a character beyond the BMP, which pi's `?` sees as two."""
    values = [facts.surface, *facts.match_values]
    if facts.asking_units:
        values += [u.command for u in facts.asking_units]
    return not all(map(str.isascii, values)) and any(utf16_units(value) != value for value in values)
