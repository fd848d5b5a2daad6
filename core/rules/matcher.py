"""Wildcard patterns compiled once, exactly as the reference matcher reads them (contract §6.3).

A pattern is home-expanded, then `*` (and `**`) match any run of characters including `/` and
newlines, `?` matches one character, everything else is literal, and the match is anchored and
case-sensitive. A pattern ending in `" *"` makes that tail optional, so `git *` matches `git`.
Only POSIX semantics are implemented: win32 case folding and `\\`-for-`/` are not emulated.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

_HOME_WORDS = ("~", "$HOME", "${HOME}")


def expand_home(text: str, home: str) -> str:
    """Expand a leading `~`, `$HOME` or `${HOME}` (alone, or followed by `/` or `\\`) to `home`."""
    for word in _HOME_WORDS:
        if text == word:
            return home
        for sep in ("/", "\\"):
            prefix = word + sep
            if text.startswith(prefix):
                return _join(home, text[len(prefix) :])
    return text


def _join(home: str, rest: str) -> str:
    """`path.join(home, rest)` on POSIX: normalized, keeping a trailing separator."""
    if not rest:
        return posixpath.normpath(home)
    joined = posixpath.normpath(posixpath.join(home, rest))
    return joined + "/" if rest.endswith(("/", "\\")) and joined != "/" else joined


def _regex_source(pattern: str) -> str:
    """Translate wildcard text to an anchored regex body (no flags)."""
    parts: list[str] = []
    for char in pattern:
        if char == "*":
            if not parts or parts[-1] != ".*":
                parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Wildcard:
    """A compiled pattern. `matches(value)` is the hot path, so the test is chosen at compile time.

    `source` is the anchored-by-fullmatch regex body, so many patterns can share one regex.
    """

    text: str
    expanded: str
    source: str
    matches: Callable[[str], bool] = field(repr=False, compare=False)


def compile_wildcard(pattern: str, home: str | None = None) -> Wildcard:
    """Compile `pattern`; pass `home` to home-expand it first (rule patterns), `None` not to."""
    expanded = expand_home(pattern, home) if home is not None else pattern
    optional_tail = expanded.endswith(" *")
    body = expanded[:-2] if optional_tail else expanded
    source = _regex_source(body) + ("(?: .*)?" if optional_tail else "")
    if expanded in ("*", "**"):
        return Wildcard(pattern, expanded, source, lambda _value: True)
    if "*" not in expanded and "?" not in expanded:
        return Wildcard(pattern, expanded, source, expanded.__eq__)
    regex = re.compile(source, re.DOTALL)
    return Wildcard(pattern, expanded, source, lambda value: regex.fullmatch(value) is not None)
