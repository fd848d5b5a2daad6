"""One readable, single-line, escape-free log line per served request."""

from __future__ import annotations

import logging

from core.hidden import is_hidden, none_hidden


def log_safe(text: str, limit: int = 120) -> str:
    """Untrusted text for a log line: every hidden code point (`core.hidden`, the app's definition),
    newline and tab becomes `\\uXXXX`, and a backslash is doubled, so no escape is ambiguous."""
    joined = text if none_hidden(text) and "\\" not in text else _escaped(text)
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

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escape_hidden(super().formatMessage(record))

    def formatException(self, ei: logging._SysExcInfoType) -> str:
        return escape_hidden(super().formatException(ei), keep_newlines=True)

    def formatStack(self, stack_info: str) -> str:
        return escape_hidden(super().formatStack(stack_info), keep_newlines=True)
