"""Agent names as the child sends them: untrusted, so checked before one becomes a file name.

A name that could escape the agents folder, or that names nobody, loads no agent file and marks
the policy suspicious (`core.rules.config`); pi 20.7.3 still opens a file for most such names
(`pi_opens`), which pi's reading honours.
"""

from __future__ import annotations

import unicodedata

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
