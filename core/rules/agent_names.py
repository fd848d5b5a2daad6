"""Agent names as the child sends them: untrusted, so checked before one becomes a file name.

One check for the judgment and the app: a name that could escape the agents folder, that names
nobody, or that hides or fakes characters loads no agent file, marks the policy suspicious
(`core.rules.config`) and is flagged to the person with the same words. pi 20.7.3 still opens a
file for most such names (`pi_opens`), which pi's reading honours.
"""

from __future__ import annotations

import unicodedata

from core.text import is_hidden


def suspicious_agent_reason(name: str) -> str | None:
    """Why `name` must not be used as a file name (words that follow "suspicious agent name: "),
    or None when it is usable."""
    if not name.strip():
        return "empty agent name"
    if name.strip().lower() == "unknown":
        return "named 'unknown' (the child could not tell its agent name)"
    if "\x00" in name:
        return "contains NUL"
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if ".." in name:
        return "contains '..'"
    if any(unicodedata.category(c) == "Cs" for c in name):
        return "contains a lone surrogate (no file can have that name)"
    if any(is_hidden(c) or c in "\n\t" for c in name):
        return "contains control or hidden characters"
    return None


def pi_opens(name: str) -> bool:
    """pi 20.7.3 opens `<agents>/<name>.md` for this name (any non-empty name a file can have)."""
    return bool(name) and "\x00" not in name and not any(
        unicodedata.category(c) == "Cs" for c in name)
