"""Untrusted text made safe: which code points must never reach a person as themselves (they hide,
reorder or fake text), and the single-line, escape-free log line built on that definition.

One definition for the app's sanitizer (`tui.sanitize` turns each into a visible token), the checks of
child-reported names (`core.rules.agent_names`) and every log line (`log_safe`, `LineFormatter`): the
Cc, Cf, Zl, Zp, Cn, Cs and Co categories, whitespace other than the plain space, and the
default-ignorable code points that are not Cf. `\\n` and `\\t` are not hidden (the sanitizer marks
them itself).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from functools import lru_cache

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cn", "Cs", "Co"})
# Default_Ignorable_Code_Point members that are not Cf (they render as nothing).
_IGNORABLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0000, 0xE0FFF),
)

#: How a cut says how much it hid (`…+N`, as everywhere in the app): no hidden code point.
CUT = "\u2026"

_IGNORABLE = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _IGNORABLE_RANGES) + "]")


def none_hidden(text: str) -> bool:
    """True when no code point of `text` is hidden, nor `\\n` or `\\t` (a fast check, no per-character
    lookup: `str.isprintable` is False for every hidden category and for whitespace but the space)."""
    # ASCII text holds none of the ignorable code points (all beyond ASCII): no search for them (a
    # burst's joined log lines are kilobytes each). Nor does text whose only other character is the
    # app's own cut mark (a fail-safe denial's reason is cut at 120 in every answer's part): the search
    # cost ~150 µs such a line of 64 answers. ASCII text is printable when it holds no control
    # character: deleted by a table, it keeps its length (a third of `isprintable`'s time).
    if not text.isascii():
        rest = text.replace(CUT, "")
        if not rest.isascii():
            return text.isprintable() and _IGNORABLE.search(text) is None
        text = rest
    return len(text.encode("ascii").translate(None, _ASCII_CONTROLS)) == len(text)


#: The ASCII characters `str.isprintable` refuses.
_ASCII_CONTROLS = bytes(range(0x20)) + b"\x7f"


@lru_cache(maxsize=4096)
def is_hidden(char: str) -> bool:
    """True when `char` must never reach the terminal as itself."""
    if char in "\n\t":
        return False
    point = ord(char)
    category = unicodedata.category(char)
    if category in _HIDDEN_CATEGORIES:
        return True
    if category == "Zs" and char != " ":
        return True
    return any(low <= point <= high for low, high in _IGNORABLE_RANGES)



def log_safe(text: str, limit: int = 120) -> str:
    """Untrusted text for a log line: every hidden code point (`core.text`, the app's definition),
    newline and tab becomes `\\uXXXX`, and a backslash is doubled, so no escape is ambiguous."""
    # `none_hidden`, inline: every log line of a burst passes here a few times.
    # ASCII text holds none of the ignorable code points (all beyond ASCII): no search for them.
    plain = text.isprintable() and "\\" not in text and (text.isascii() or _IGNORABLE.search(text) is None)
    joined = text if plain else _escaped(text)
    if len(joined) <= limit:
        return joined
    # A cut says how much it hid (`…+N`), as everywhere in the app.
    keep = max(0, limit - len(f"…+{len(joined)}"))
    return f"{joined[:keep]}…+{len(joined) - keep}"


def _escaped(text: str) -> str:
    out: list[str] = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\n\t" or is_hidden(ch):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def escape_hidden(text: str, keep_newlines: bool = False) -> str:
    """Every hidden code point, tab and newline (unless kept) as `\\uXXXX`; backslashes unchanged, so
    text a call site already escaped with `log_safe` passes through as it is."""
    if none_hidden(text):
        return text
    kept = "\n" if keep_newlines else ""
    return "".join(
        f"\\u{ord(ch):04x}" if (ch == "\t" or (ch == "\n" and not kept) or is_hidden(ch)) else ch
        for ch in text
    )


class LineFormatter(logging.Formatter):
    """The last guard of every log line, whatever a call site passed (an exception's text holds a
    child's file name or value): a message stays one line with nothing hidden in it; a traceback keeps
    its line breaks and nothing else hidden."""

    _stamped: tuple[int, str | None, str] = (-1, None, "")
    """The last second formatted (a burst logs thousands of lines within one)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """Formatted once per second of `datefmt` (the default format shows milliseconds: not cached)."""
        second = int(record.created)
        if datefmt is None:
            return super().formatTime(record, datefmt)
        if self._stamped[:2] != (second, datefmt):
            self._stamped = (second, datefmt, super().formatTime(record, datefmt))
        return self._stamped[2]

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escape_hidden(super().formatMessage(record))

    def formatException(self, ei: logging._SysExcInfoType) -> str:
        return escape_hidden(super().formatException(ei), keep_newlines=True)

    def formatStack(self, stack_info: str) -> str:
        return escape_hidden(super().formatStack(stack_info), keep_newlines=True)
