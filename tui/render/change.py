"""See the change, not just the path: a write's or edit's content as a literal, sanitised diff.

The wire contract names no field for file content: a newer child's `payload.evidence` is the only
place it can travel (`[{label, text, detail}]`, "complete"; 20.7.3 sends no payload at all). This
module recognises the labels pi's own tools use for their inputs — `content` for a write, and
`oldText`/`newText` pairs for an edit — and is inert otherwise. It is display text from the child,
never facts: the decision is about the path in the facts, and the diff says so.

`change_from_evidence` is pure (evidence in, `FileChange` or None out) and `change_renderable`
turns one into a Rich `Text` (never markup; every hidden character a visible token). Work is
bounded: at most `MAX_LINES` lines per side are compared and shown, each cut at `MAX_LINE_CHARS`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rich.text import Text

from tui.sanitize import sanitize

MAX_LINES = 1000
MAX_LINE_CHARS = 400
_WRITE_LABELS = frozenset({"content", "contents", "filecontent", "file_content"})
_OLD_LABELS = frozenset({"oldtext", "old_text", "oldstring", "old_string", "old"})
_NEW_LABELS = frozenset({"newtext", "new_text", "newstring", "new_string", "new"})


class Evidence(Protocol):
    """One `payload.evidence` entry as the wire layer reads it."""

    @property
    def label(self) -> str: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class FileChange:
    """A write (`before` None: the file's new content) or an edit's replacements, in order."""

    path: str
    before: tuple[str, ...] | None
    after: tuple[str, ...]


def change_from_evidence(path: str, evidence: Sequence[Evidence]) -> FileChange | None:
    """The change the child's evidence describes, or None when it carries no content."""
    written: list[str] = []
    olds: list[str] = []
    news: list[str] = []
    for entry in evidence:
        label = entry.label.strip().lower()
        if label in _WRITE_LABELS:
            written.append(entry.text)
        elif label in _OLD_LABELS:
            olds.append(entry.text)
        elif label in _NEW_LABELS:
            news.append(entry.text)
    if olds or news:
        pairs = max(len(olds), len(news))
        return FileChange(path, tuple((olds + [""] * pairs)[:pairs]), tuple((news + [""] * pairs)[:pairs]))
    if written:
        return FileChange(path, None, ("".join(written),))
    return None


def diff_lines(change: FileChange) -> tuple[list[str], int]:
    """Unified diff lines (bounded) and how many lines were left out."""
    out: list[str] = []
    hidden = 0
    befores = change.before if change.before is not None else ("",) * len(change.after)
    for index, (old, new) in enumerate(zip(befores, change.after, strict=True)):
        old_lines, new_lines = old.splitlines(), new.splitlines()
        hidden += max(0, len(old_lines) - MAX_LINES) + max(0, len(new_lines) - MAX_LINES)
        label = f" (replacement {index + 1})" if len(change.after) > 1 else ""
        diff = difflib.unified_diff(
            old_lines[:MAX_LINES],
            new_lines[:MAX_LINES],
            fromfile="/dev/null" if change.before is None else f"{change.path}{label}",
            tofile=f"{change.path}{label}",
            lineterm="",
            n=3,
        )
        out.extend(diff)
    return out, hidden


_STYLES = {"+": "green", "-": "red", "@": "cyan"}


def change_renderable(change: FileChange) -> Text:
    """The diff as literal Rich text: `+` green, `-` red, hunk headers cyan, hidden characters as tokens."""
    lines, hidden = diff_lines(change)
    out = Text(no_wrap=False)
    kind = "new content written to" if change.before is None else "edit of"
    out.append(f"The child's payload shows the {kind} ", "dim")
    out.append_text(sanitize(change.path, single_line=True).text("bold"))
    out.append(" (display only, not facts):\n", "dim")
    for line in lines:
        head = line[:3] if line.startswith(("+++", "---")) else line[:1]
        style = "bold" if head in ("+++", "---") else _STYLES.get(head, "")
        shown = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS]
        out.append_text(sanitize(shown, single_line=False).text(style))
        if len(line) > MAX_LINE_CHARS:
            out.append(f" … {len(line) - MAX_LINE_CHARS} more characters", "bold yellow")
        out.append("\n")
    if hidden:
        out.append(f"… {hidden} more lines not shown", "bold yellow")
    out.rstrip()
    return out
