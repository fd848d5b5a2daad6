"""Loading one config scope (a config.json or an agent file) into origin-tagged entries.

A missing file is an empty, valid scope. A present file that cannot be read, parsed or validated
is an invalid scope: it contributes nothing, and the caller floors the policy when it is not the
global scope. Bare `path` / `external_directory` keys are expanded here, per file, into their
`_read` and `_write` members (read first), so a higher scope's bare key overrides a lower scope's
directional entries through the ordinary merge.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from core.rules.bounded_read import read_config_text
from core.rules.frontmatter import FrontmatterError, read_permission_block
from core.rules.jsonc import loads_jsonc
from core.rules.model import DIRECTIONAL_SURFACES, FAMILIES, Action, ConfigError
from core.rules.pi_reading import read_permission_block_as_pi, without_proto_keys
from core.rules.validate import INVALID, validate_config, validate_permission


@dataclass(frozen=True, slots=True)
class FileSignature:
    """Enough of `stat()` to notice an edit, a replacement or a deletion cheaply."""

    path: str
    exists: bool
    mtime_ns: int = 0
    size: int = 0
    inode: int = 0

    @classmethod
    def of(cls, path: Path) -> FileSignature:
        """Stat `path` now (a missing or unstat-able file is `exists=False`)."""
        try:
            info = os.stat(path)
        except OSError:
            return cls(str(path), False)
        return cls(str(path), True, info.st_mtime_ns, info.st_size, info.st_ino)


@dataclass(frozen=True, slots=True)
class Entry:
    """One pattern's action, and which scope and file set it."""

    action: Action
    reason: str | None
    origin: str
    source: str


@dataclass(frozen=True, slots=True)
class SurfaceValue:
    """A surface's value: a bare state (`is_map=False`, one `*` entry) or a pattern map."""

    is_map: bool
    patterns: dict[str, Entry]


Permission = dict[str, SurfaceValue]


@dataclass(frozen=True, slots=True)
class Scope:
    """One loaded file. `invalid` means present but unusable; `errors` say why."""

    origin: str
    signature: FileSignature
    permission: Permission = field(default_factory=dict)
    knobs: dict[str, Any] = field(default_factory=dict)
    errors: tuple[ConfigError, ...] = ()
    #: The same file (the same read of it) as pi 20.7.3 reads it, when the store loaded both:
    #: it travels with this scope through the reload gate, so a held change holds both readings.
    pi_reading: Scope | None = field(default=None, repr=False, compare=False)
    #: The text this scope was read from (None when the file is missing or could not be read):
    #: what the store records as accepted (`core.rules.accepted`).
    text: str | None = field(default=None, repr=False, compare=False)

    @property
    def invalid(self) -> bool:
        """A present file that contributes nothing because of its errors."""
        return bool(self.errors)


def load_config_scope(path: Path, origin: str, *, as_pi: bool = False) -> Scope:
    """Load a config.json-shaped file (global, project, or the `--rules` file).

    `as_pi` validates it as pi 20.7.3 does (`core.rules.pi_reading`).
    """
    signature = FileSignature.of(path)
    if not signature.exists:
        return Scope(origin, signature)
    try:
        text = read_config_text(path, lenient=as_pi)
    except (OSError, UnicodeDecodeError) as exc:
        return _broken(origin, signature, "(file)", f"unreadable: {exc}")
    except ValueError as exc:
        return _broken(origin, signature, "(file)", f"JSON parse error: {exc}")
    return config_scope_from_text(text, path, origin, signature, as_pi=as_pi)


def config_scope_from_text(text: str, path: Path, origin: str, signature: FileSignature, *,
                           as_pi: bool = False) -> Scope:
    """A config.json-shaped file's scope from its text (what this node just wrote, never re-read)."""
    try:
        data = loads_jsonc(text)
    except ValueError as exc:
        return _broken(origin, signature, "(file)", f"JSON parse error: {exc}", text)
    errors = validate_config(data, str(path), as_pi=as_pi)
    if errors:
        return Scope(origin, signature, errors=tuple(errors), text=text)
    document = cast(dict[str, Any], data)
    knobs = {k: v for k, v in document.items() if k not in ("permission", "$schema")}
    raw = document.get("permission", {})
    permission = to_permission(without_proto_keys(raw) if as_pi else raw, origin, str(path), expand=not as_pi)
    return Scope(origin, signature, permission, knobs, text=text)


def load_agent_scope(path: Path, origin: str, *, as_pi: bool = False) -> Scope:
    """Load the `permission:` frontmatter of an agent markdown file (`as_pi`: as pi 20.7.3 reads it)."""
    signature = FileSignature.of(path)
    if not signature.exists:
        return Scope(origin, signature)
    try:
        text = read_config_text(path, lenient=as_pi)
    except (OSError, UnicodeDecodeError) as exc:
        return _broken(origin, signature, "(file)", f"unreadable: {exc}")
    return agent_scope_from_text(text, path, origin, signature, as_pi=as_pi)


def agent_scope_from_text(text: str, path: Path, origin: str, signature: FileSignature, *,
                          as_pi: bool = False) -> Scope:
    """An agent file's scope from its text (a recorded accepted version, or what was just read)."""
    if as_pi:
        pi_block = read_permission_block_as_pi(text)
        permission = to_permission(pi_block, origin, str(path), expand=False) if pi_block else {}
        return Scope(origin, signature, permission, text=text)
    try:
        block = read_permission_block(text)
    except FrontmatterError as exc:
        return _broken(origin, signature, "permission", f"{INVALID}: frontmatter {exc}", text)
    if block is None:
        return Scope(origin, signature, text=text)
    errors = validate_permission(block, str(path), max_reason=None)
    if errors:
        return Scope(origin, signature, errors=tuple(errors), text=text)
    # An empty nested map says nothing in pi's reader (it is dropped, so a lower scope's entry
    # for that surface stands); keeping it would replace that entry with nothing.
    block = {k: v for k, v in cast(dict[str, Any], block).items() if v != {}}
    return Scope(origin, signature, to_permission(block, origin, str(path)), text=text)


def _broken(origin: str, signature: FileSignature, key: str, reason: str, text: str | None = None) -> Scope:
    return Scope(origin, signature, errors=(ConfigError(signature.path, key, reason),), text=text)


def to_permission(raw: dict[str, Any], origin: str, source: str, *, expand: bool = True) -> Permission:
    """Turn a validated `permission` block into entries, expanding the family sugar (`expand`)."""
    permission: Permission = {}
    for surface, value in raw.items():
        if isinstance(value, str):
            entry = Entry(cast(Action, value), None, origin, source)
            permission[surface] = SurfaceValue(False, {"*": entry})
        else:
            patterns = {p: _entry(a, origin, source) for p, a in value.items()}
            permission[surface] = SurfaceValue(True, patterns)
    return expand_families(permission) if expand else permission


def _entry(action: str | dict[str, str], origin: str, source: str) -> Entry:
    if isinstance(action, dict):
        return Entry("deny", action.get("reason"), origin, source)
    return Entry(cast(Action, action), None, origin, source)


def expand_families(permission: Permission) -> Permission:
    """Replace each bare family key by its members, at the earlier of the two positions.

    The bare key's entries come first in each member and the explicit member's entries after
    them, so an explicit directional entry has the final say; a member given as a bare state
    replaces the family's entries outright (string over map, as in the scope merge).
    """
    expanded: Permission = {}
    for surface, value in permission.items():
        if surface in FAMILIES:
            for member in FAMILIES[surface]:
                if member not in expanded:
                    expanded[member] = _sugar(value, permission.get(member))
        elif surface in DIRECTIONAL_SURFACES and _family(surface) in permission:
            if surface not in expanded:
                expanded[surface] = _sugar(permission[_family(surface)], value)
        else:
            expanded[surface] = value
    return expanded


def _family(member: str) -> str:
    return member.rsplit("_", 1)[0]


def _sugar(family: SurfaceValue, member: SurfaceValue | None) -> SurfaceValue:
    if member is None:
        return family
    if not member.is_map:
        return member
    return SurfaceValue(True, {**family.patterns, **member.patterns})
