"""Config files may carry `//` and `/* */` comments, as the reference loader accepts them."""

from __future__ import annotations

import json


def loads_jsonc(text: str) -> object:
    """Parse JSON after removing comments outside strings; raises `json.JSONDecodeError`."""
    return json.loads(strip_comments(text))


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
            end = _string_end(text, index)
            out.append(text[index:end])
            index = end
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    index = start + 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
        elif text[index] == '"':
            return index + 1
        else:
            index += 1
    return len(text)
