"""Config files may carry `//` and `/* */` comments, as the reference loader accepts them.

Nesting is bounded before parsing (`MAX_CONFIG_NESTING`): a deeply nested file is a config error,
not a `RecursionError` that stops serving.
"""

from __future__ import annotations

import json

from core.rules.bounded_read import MAX_CONFIG_NESTING
from core.wire.base import check_nesting, string_end


def loads_jsonc(text: str) -> object:
    """Parse JSON after removing comments outside strings; raises `ValueError` (a
    `json.JSONDecodeError`, or `NestedTooDeeply`)."""
    stripped = strip_comments(text)
    check_nesting(stripped, MAX_CONFIG_NESTING)
    return json.loads(stripped)


def strip_comments(text: str) -> str:
    """Remove comments, keeping strings (with their escapes) and newlines intact."""
    out: list[str] = []
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        pair = text[index : index + 2]
        if pair == "//":
            newline = text.find("\n", index)
            index = length if newline < 0 else newline
        elif pair == "/*":
            close = text.find("*/", index + 2)
            index = length if close < 0 else close + 2
        elif char == '"':
            end = string_end(text, index)
            out.append(text[index:end])
            index = end
        else:
            out.append(char)
            index += 1
    return "".join(out)
