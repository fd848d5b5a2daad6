"""The minimal agent-file frontmatter reader: `key: value` scalars and nested maps, nothing else.

Only the `permission:` block is parsed; the other frontmatter keys (name, description, model, ...)
may use YAML this reader does not understand, and they are skipped unread. Inside the block a
line that is not a scalar or a map opener is an error, so a typo fails closed instead of silently
dropping a deny. No YAML library is used, by contract.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PERMISSION_KEY = re.compile(r"""^(permission|"permission"|'permission')\s*:""")


class FrontmatterError(ValueError):
    """A line of the `permission:` block that the minimal reader cannot accept."""

    def __init__(self, line_number: int, reason: str) -> None:
        super().__init__(f"line {line_number}: {reason}")
        self.line_number = line_number
        self.reason = reason


@dataclass(frozen=True, slots=True)
class _Line:
    number: int
    indent: int
    text: str


def extract_frontmatter(markdown: str) -> tuple[list[str], int] | None:
    """The lines between the opening and closing `---`, and the first one's line number."""
    lines = markdown.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return lines[1:index], 2
    return None


def read_permission_block(markdown: str) -> object | None:
    """The `permission:` value of an agent file's frontmatter, or None when there is none.

    Indentation is read as pi reads it: any run of spaces and tabs, each character one column,
    and a line belongs to the nearest open map indented less than it (so ragged siblings and
    tab indentation mean what they mean in pi). A key with nothing under it is an empty map.
    """
    found = extract_frontmatter(markdown)
    if found is None:
        return None
    lines, first_number = found
    body: list[_Line] = []
    inside = False
    for offset, raw in enumerate(lines):
        number = first_number + offset
        text = _strip_comment(raw).rstrip()
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip(" \t"))
        if indent == 0:
            if inside and text.startswith("-"):
                raise FrontmatterError(number, "lists are not supported")
            if inside:
                break
            if not _PERMISSION_KEY.match(text):
                continue
            _, value = _split_pair(text, number)
            if value:
                raise FrontmatterError(number, "permission must be a nested map")
            inside = True
        elif inside:
            body.append(_Line(number, indent, text.strip()))
    if not inside or not body:
        return None
    return _parse_nested(body)


def _parse_nested(lines: list[_Line]) -> dict[str, object]:
    root: dict[str, object] = {}
    stack: list[tuple[int, dict[str, object]]] = [(-1, root)]
    for line in lines:
        key, value = _split_pair(line.text, line.number)
        while len(stack) > 1 and line.indent <= stack[-1][0]:
            stack.pop()
        target = stack[-1][1]
        if value:
            target[key] = value
        else:
            child: dict[str, object] = {}
            target[key] = child
            stack.append((line.indent, child))
    return root


def _split_pair(text: str, number: int) -> tuple[str, str]:
    """Split `key: value`, honouring a quoted key (patterns such as `"git *"` contain spaces)."""
    if text.startswith("- "):
        raise FrontmatterError(number, "lists are not supported")
    if text[0] in "\"'":
        key, rest = _read_quoted(text, number)
    else:
        colon = text.find(":")
        if colon < 0:
            raise FrontmatterError(number, "expected 'key: value'")
        key, rest = text[:colon].strip(), text[colon:]
    if not rest.startswith(":") or (len(rest) > 1 and rest[1] != " "):
        raise FrontmatterError(number, "expected ': ' after the key")
    value = rest[1:].strip()
    if value[:1] in ("{", "[", "|", ">", "&", "*", "!"):
        raise FrontmatterError(number, "flow, block and anchor syntax is not supported")
    if value[:1] in "\"'" and value:
        value, tail = _read_quoted(value, number)
        if tail.strip():
            raise FrontmatterError(number, "text after a quoted value")
    return key, value


def _read_quoted(text: str, number: int) -> tuple[str, str]:
    quote = text[0]
    out: list[str] = []
    index = 1
    while index < len(text):
        char = text[index]
        if quote == '"' and char == "\\" and index + 1 < len(text):
            out.append(text[index + 1])
            index += 2
            continue
        if char == quote:
            if quote == "'" and text[index + 1 : index + 2] == "'":
                out.append("'")
                index += 2
                continue
            return "".join(out), text[index + 1 :]
        out.append(char)
        index += 1
    raise FrontmatterError(number, "unterminated quoted string")


def _strip_comment(line: str) -> str:
    """Drop a ` #` comment that is outside quotes."""
    quote: str | None = None
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index]
    return line
