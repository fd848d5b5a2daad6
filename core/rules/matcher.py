"""Wildcard patterns compiled once, exactly as the reference matcher reads them
(`docs/design/contract.md` § Rules).

A pattern is home-expanded, then `*` (and `**`) match any run of characters including `/` and
newlines, `?` matches one character, everything else is literal, and the match is anchored and
case-sensitive. A pattern ending in `" *"` makes that tail optional, so `git *` matches `git`.
Only POSIX semantics are implemented: win32 case folding and `\\`-for-`/` are not emulated.

Matching never backtracks: a pattern is split at its `*`s into fixed-length segments; the first
must sit at the start, the last at the end, and each middle one is taken at its leftmost place
after the previous one (leftmost is always safe for fixed-length pieces). A literal segment is a
`str.find`; a segment with `?` is a quantifier-free regex tried at each start. One match costs
at most `len(value) * len(pattern)` character comparisons, and is linear in the value when the
segments are literal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

_HOME_WORDS = ("${HOME}", "$HOME", "~")
_HOME_WORDS_20_7_3 = ("$HOME", "~")


def expand_home(text: str, home: str, *, brace_home: bool = True) -> str:
    """Expand a leading `~`, `$HOME` or `${HOME}` (alone, or followed by `/` or `\\`) to `home`.

    The rest is joined as node's POSIX `path.join` does: appended after a `/`, then normalised
    (repeated `/` collapsed, `.` and `..` resolved, a trailing `/` kept). A `\\` is an ordinary
    character on POSIX, so `$HOME/build\\` keeps its backslash and `~\\/x` is `<home>/x`.
    `brace_home=False` reads as pi 20.7.3 does, which does not know `${HOME}`.
    """
    for word in _HOME_WORDS if brace_home else _HOME_WORDS_20_7_3:
        if text == word:
            return home
        if text.startswith((word + "/", word + "\\")):
            return node_posix_join(home, text[len(word) + 1 :])
    return text


def acts_as(pattern: str, surface: str, home: str) -> str | None:
    """How `pattern` acts when that differs from how it is written, else None: exactly the
    expansion the matcher applies to a pattern before matching (a leading `~`, `$HOME` or `${HOME}`
    expanded, then `.` and `..` resolved as node's `path.join` does). So a grant
    `~/projects/app/../../../../*` acts as `/*`, `$HOME/../../bin/sh -c id` as `/bin/sh -c id`
    (issue 20 finding 6). `surface` is accepted for symmetry: every surface's patterns expand alike."""
    del surface
    expanded = expand_home(pattern, home)
    return None if expanded == pattern else expanded


def node_posix_join(base: str, rest: str) -> str:
    """`path.posix.join(base, rest)`: the non-empty parts joined by `/`, then normalised."""
    joined = "/".join(part for part in (base, rest) if part)
    return node_posix_normalize(joined) if joined else "."


def node_posix_normalize(path: str) -> str:
    """`path.posix.normalize`: unlike `posixpath.normpath`, `//x` is `/x` and a trailing `/` stays."""
    if not path:
        return "."
    absolute = path.startswith("/")
    trailing = path.endswith("/")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not absolute:
                parts.append("..")
            continue
        parts.append(part)
    body = "/".join(parts)
    if not body and not absolute:
        body = "."
    if body and trailing:
        body += "/"
    return "/" + body if absolute else body


class _Segment:
    """A fixed-length run between two `*`: literal text, `?` matching any one character."""

    __slots__ = ("length", "literal", "regex")

    def __init__(self, text: str) -> None:
        self.length = len(text)
        self.literal: str | None = text if "?" not in text else None
        self.regex = None if self.literal is not None else re.compile(
            ".".join(re.escape(piece) for piece in text.split("?")), re.DOTALL)

    def at(self, value: str, start: int) -> bool:
        """The segment sits exactly at `start`."""
        if self.literal is not None:
            return value.startswith(self.literal, start)
        assert self.regex is not None
        return self.regex.match(value, start) is not None

    def find(self, value: str, start: int, end: int) -> int:
        """Leftmost place in `value[start:end]` where the segment fits, or -1."""
        if self.literal is not None:
            return value.find(self.literal, start, end)
        assert self.regex is not None
        found = self.regex.search(value, start, end)
        return -1 if found is None else found.start()


class _Glob:
    """One anchored glob: `head * middle... * tail`, or a single segment when there is no `*`."""

    __slots__ = ("head", "middle", "min_length", "starred", "tail")

    def __init__(self, pattern: str) -> None:
        pieces = pattern.split("*")
        self.starred = len(pieces) > 1
        self.head = _Segment(pieces[0])
        self.tail = _Segment(pieces[-1])
        self.middle = tuple(_Segment(p) for p in pieces[1:-1] if p)
        self.min_length = sum(len(p) for p in pieces)

    def matches(self, value: str) -> bool:
        size = len(value)
        if not self.starred:
            return size == self.head.length and self.head.at(value, 0)
        if size < self.min_length or not self.head.at(value, 0):
            return False
        end = size - self.tail.length
        if not self.tail.at(value, end):
            return False
        position = self.head.length
        for segment in self.middle:
            found = segment.find(value, position, end)
            if found < 0:
                return False
            position = found + segment.length
        return True


@dataclass(frozen=True, slots=True)
class Wildcard:
    """A compiled pattern. `matches(value)` is the hot path, so the test is chosen at compile time.

    `literal` is the expanded text when the pattern has no wildcard (an exact-match rule), so a
    rule set can look those up in a dict instead of trying them one by one; `head` is the
    literal text every matching value starts with, so a rule set can skip the others.
    """

    text: str
    expanded: str
    literal: str | None
    matches: Callable[[str], bool] = field(repr=False, compare=False)
    head: str = ""


_BEYOND_BMP = re.compile("[\U00010000-\U0010ffff]")


def utf16_units(text: str) -> str:
    """`text` with each character beyond the BMP written as its two UTF-16 surrogates, as a
    JavaScript regex without the `u` flag sees it (so `?` matches half of an emoji)."""
    if text.isascii() or not _BEYOND_BMP.search(text):
        return text
    return _BEYOND_BMP.sub(_surrogates, text)


def _surrogates(found: re.Match[str]) -> str:
    offset = ord(found.group()) - 0x10000
    return chr(0xD800 + (offset >> 10)) + chr(0xDC00 + (offset & 0x3FF))


def _prefix(prefix: str, optional_tail: bool) -> Callable[[str], bool]:
    """`prefix*`; with `optional_tail` (`prefix` ends with a space) the prefix without it matches too."""
    if optional_tail:
        bare = prefix[:-1]
        return lambda value: value == bare or value.startswith(prefix)
    return lambda value: value.startswith(prefix)


def compile_wildcard(
    pattern: str, home: str | None = None, *, brace_home: bool = True, utf16: bool = False
) -> Wildcard:
    """Compile `pattern`; pass `home` to home-expand it first (rule patterns), `None` not to.

    `utf16=True` matches as pi's JavaScript regexes do, on UTF-16 units (`utf16_units`).
    """
    expanded = expand_home(pattern, home, brace_home=brace_home) if home is not None else pattern
    if utf16:
        inner = compile_wildcard(utf16_units(expanded))
        head = expanded if inner.literal is not None else ""
        return Wildcard(pattern, expanded, expanded if inner.literal is not None else None,
                        lambda value: inner.matches(utf16_units(value)), head)
    if expanded and not expanded.strip("*"):
        return Wildcard(pattern, expanded, None, lambda _value: True)
    if "*" not in expanded and "?" not in expanded:
        return Wildcard(pattern, expanded, expanded, expanded.__eq__, expanded)
    optional_tail = expanded.endswith(" *")
    head = re.split(r"[*?]", expanded[:-2] if optional_tail else expanded, maxsplit=1)[0]
    if "?" not in expanded and expanded.find("*") == len(expanded) - 1:
        # The common shape, a literal prefix (`git *`, `/tmp/*`): one test, no glob.
        return Wildcard(pattern, expanded, None, _prefix(expanded[:-1], optional_tail), head)
    whole = _Glob(expanded)
    if not optional_tail:
        return Wildcard(pattern, expanded, None, whole.matches, head)
    bare = _Glob(expanded[:-2])
    return Wildcard(pattern, expanded, None, lambda value: bare.matches(value) or whole.matches(value), head)
