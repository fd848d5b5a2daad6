"""Which code points must never reach a person as themselves (they hide, reorder or fake text).

One definition for the app's sanitizer (`tui.sanitize` turns each into a visible token) and for the
checks of child-reported names (`core.rules.agent_names`): the Cc, Cf, Zl, Zp, Cn, Cs and Co
categories, whitespace other than the plain space, and the default-ignorable code points that are
not Cf. `\\n` and `\\t` are not hidden (the sanitizer marks them itself).
"""

from __future__ import annotations

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

_IGNORABLE = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _IGNORABLE_RANGES) + "]")


def none_hidden(text: str) -> bool:
    """True when no code point of `text` is hidden, nor `\\n` or `\\t` (a fast check, no per-character
    lookup: `str.isprintable` is False for every hidden category and for whitespace but the space)."""
    return text.isprintable() and _IGNORABLE.search(text) is None


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
