"""Strict validation of one config document, mirroring the reference schema
(`docs/design/contract.md` § Rules).

Any problem rejects the whole scope, so the caller gets every error (file, key, reason) and no
partial config: an unknown top-level key is "Unrecognized config key", a wrong type or value is
"Invalid config value". Known keys are the 20.7.3 set plus the newer mainline additions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from core.rules.model import ACTIONS, DIRECTIONAL_SURFACES, ConfigError

UNRECOGNIZED = "Unrecognized config key"
INVALID = "Invalid config value"
_MAX_REASON = 500
_MAX_SAFE_INTEGER = 2**53 - 1
_PROTO = "__proto__"
_DIALOG_KEYS = frozenset({"approve", "approveSession", "approveSessionBoth", "deny", "denyWithReason"})
_NOTIFICATIONS = frozenset({"bell", "osc9", "osc777"})
_TRUST_FAMILIES = frozenset({"external_directory", "path"})
_DIRECTIONAL_SHAPE = re.compile(r"^(path|external_directory)_")

Check = Callable[[object], str | None]


def _boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else "expected a boolean"


def _string(value: object) -> str | None:
    return None if isinstance(value, str) else "expected a string"


def _positive_int(value: object) -> str | None:
    """A whole number >= 1 that JavaScript holds exactly: the schema's `int()` refuses anything
    beyond 2**53 - 1 (`1e20`, `9007199254740994`), and pi 20.7.3 then drops the whole file."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "expected an integer"
    if isinstance(value, float) and not value.is_integer():
        return "expected an integer"
    if value > _MAX_SAFE_INTEGER:
        return f"expected an integer <= {_MAX_SAFE_INTEGER} (2**53 - 1)"
    return None if value >= 1 else "expected an integer >= 1"


def _string_list(value: object) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        return "expected an array of non-empty strings"
    return None


def _notifications(value: object) -> str | None:
    if not isinstance(value, list) or not all(v in _NOTIFICATIONS for v in value):
        return "expected an array of 'bell', 'osc9' or 'osc777'"
    return None


def _dialog_keys(value: object) -> str | None:
    if not isinstance(value, dict):
        return "expected an object"
    unknown = sorted(set(value) - _DIALOG_KEYS)
    if unknown:
        return f"unknown dialog decision(s): {', '.join(unknown)}"
    return None if all(isinstance(v, str) for v in value.values()) else "each key must be a string"


def _shell_tools(value: object) -> str | None:
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        return "expected an object keyed by non-empty tool names"
    for alias in value.values():
        if not isinstance(alias, dict) or set(alias) - {"commandArgument", "workdirArgument"}:
            return "each alias must be {commandArgument, workdirArgument?}"
        if not all(isinstance(v, str) and v for v in alias.values()):
            return "alias arguments must be non-empty strings"
        if "commandArgument" not in alias:
            return "commandArgument is required"
    return None


def _authorizer_trust(value: object) -> str | None:
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        return "expected an object keyed by link names"
    for families in value.values():
        if not isinstance(families, list) or not all(f in _TRUST_FAMILIES for f in families):
            return "expected arrays of 'external_directory' or 'path'"
    return None


KNOBS: Mapping[str, Check] = {
    "$schema": _string,
    "debugLog": _boolean,
    "permissionReviewLog": _boolean,
    "yoloMode": _boolean,
    "doublePressToConfirm": _boolean,
    "toolInputPreviewMaxLength": _positive_int,
    "toolTextSummaryMaxLength": _positive_int,
    "piInfrastructureReadPaths": _string_list,
    "shellTools": _shell_tools,
    "forwardingTimeoutMs": _positive_int,
    "permissionDialogKeys": _dialog_keys,
    "promptNotifications": _notifications,
    "promptMaxRows": _positive_int,
    "promptFieldMaxWidth": _positive_int,
    "reviewLogFieldMaxWidth": _positive_int,
    "authorizerChain": _string_list,
    "authorizerTrust": _authorizer_trust,
}


def validate_config(data: object, path: str, *, as_pi: bool = False) -> list[ConfigError]:
    """Every error in a parsed config.json document; empty means the scope is usable.

    `as_pi` validates as pi 20.7.3's schema does, which takes any non-empty surface key.
    """
    if not isinstance(data, dict):
        return [ConfigError(path, "(root)", f"{INVALID}: expected an object")]
    errors: list[ConfigError] = []
    for key, value in data.items():
        if key == "permission":
            errors.extend(validate_permission(value, path, any_surface=as_pi))
        elif key in KNOBS:
            problem = KNOBS[key](value)
            if problem:
                errors.append(ConfigError(path, key, f"{INVALID}: {problem}"))
        else:
            errors.append(ConfigError(path, key, UNRECOGNIZED))
    return errors


def validate_permission(
    value: object, path: str, prefix: str = "permission", *, max_reason: int | None = _MAX_REASON,
    any_surface: bool = False,
) -> list[ConfigError]:
    """Errors in a `permission` block (shared by config files and agent frontmatter).

    pi checks a deny reason's length only in config.json (its schema); agent frontmatter is not
    schema-checked, so agent files pass `max_reason=None` and a long reason is kept, not fatal.
    `any_surface` validates as pi 20.7.3's schema does: any non-empty surface key, and a
    `__proto__` surface or pattern not checked at all (its records skip that key).
    """
    if not isinstance(value, dict):
        return [ConfigError(path, prefix, f"{INVALID}: expected an object keyed by surface")]
    errors: list[ConfigError] = []
    for surface, entry in value.items():
        key = f"{prefix}.{surface}"
        if any_surface and surface == _PROTO:
            continue
        if not surface:
            errors.append(ConfigError(path, key, f"{INVALID}: a surface key must not be empty"))
        elif (not any_surface and _DIRECTIONAL_SHAPE.match(surface)
              and surface not in DIRECTIONAL_SURFACES):
            legal = ", ".join(sorted(DIRECTIONAL_SURFACES))
            reason = f"{INVALID}: unknown directional surface key; legal spellings are {legal}"
            errors.append(ConfigError(path, key, reason))
        elif isinstance(entry, dict):
            errors.extend(_validate_map(entry, path, key, max_reason, skip_proto=any_surface))
        elif entry not in ACTIONS:
            errors.append(ConfigError(path, key, f"{INVALID}: expected allow, ask, deny or a map"))
    return errors


def _validate_map(
    patterns: dict[str, Any], path: str, prefix: str, max_reason: int | None, *, skip_proto: bool
) -> list[ConfigError]:
    errors: list[ConfigError] = []
    for pattern, action in patterns.items():
        key = f"{prefix}.{pattern}"
        if skip_proto and pattern == _PROTO:
            continue
        if not pattern:
            errors.append(ConfigError(path, key, f"{INVALID}: a pattern must not be empty"))
        elif isinstance(action, dict):
            problem = _deny_with_reason(action, max_reason)
            if problem:
                errors.append(ConfigError(path, key, f"{INVALID}: {problem}"))
        elif action not in ACTIONS:
            errors.append(ConfigError(path, key, f"{INVALID}: expected allow, ask, deny"))
    return errors


def _deny_with_reason(action: dict[str, Any], max_reason: int | None) -> str | None:
    if set(action) - {"action", "reason"} or action.get("action") != "deny":
        return 'expected {"action": "deny", "reason"?: string}'
    reason = action.get("reason", "")
    if not isinstance(reason, str):
        return "reason must be a string"
    if max_reason is not None and len(reason) > max_reason:
        return f"reason must be at most {max_reason} characters"
    return None
