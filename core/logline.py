"""One readable, single-line, escape-free log line per served request."""

from __future__ import annotations

import unicodedata

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def log_safe(text: str, limit: int = 120) -> str:
    """Untrusted text for a log line: controls, format characters and separators become `\\uXXXX`."""
    out: list[str] = []
    for ch in text:
        if unicodedata.category(ch) in _HIDDEN_CATEGORIES or ch == "\\":
            out.append("\\\\" if ch == "\\" else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    joined = "".join(out)
    if len(joined) <= limit:
        return joined
    # A cut says how much it hid (`…+N`), as everywhere in the app.
    keep = max(0, limit - len(f"…+{len(joined)}"))
    return f"{joined[:keep]}…+{len(joined) - keep}"
