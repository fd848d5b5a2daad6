"""One readable, single-line, escape-free log line per served request."""

from __future__ import annotations

import unicodedata

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def log_safe(text: str, limit: int = 120) -> str:
    """Untrusted text for a log line: controls, format characters and separators become `\\uXXXX`."""
    joined = text if _nothing_hidden(text) else _escaped(text)
    if len(joined) <= limit:
        return joined
    # A cut says how much it hid (`…+N`), as everywhere in the app.
    keep = max(0, limit - len(f"…+{len(joined)}"))
    return f"{joined[:keep]}…+{len(joined) - keep}"


def _nothing_hidden(text: str) -> bool:
    """The common case, without a per-character lookup: `str.isprintable` is False for every
    `_HIDDEN_CATEGORIES` character (same Unicode database as `unicodedata`)."""
    return text.isprintable() and "\\" not in text


def _escaped(text: str) -> str:
    out: list[str] = []
    for ch in text:
        if unicodedata.category(ch) in _HIDDEN_CATEGORIES or ch == "\\":
            out.append("\\\\" if ch == "\\" else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)
