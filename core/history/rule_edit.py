"""A confirmed rule written into a config file: where it can go (`targets`), what it would change
(`preview`: the file before and after, and the diff) and the write itself (`apply`), only after the
person confirmed that exact change, with the deny guard of `core.history.suggest` checked again.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from core import platform
from core.disk.entries import replace_file
from core.disk.tree import FILE_MODE
from core.history.suggest import Suggestion, SuggestionRefused, shadowed_deny
from core.rules.config import PolicyStore
from core.rules.jsonc import strip_comments
from core.rules.sources import EXTENSION, PROJECT_CONFIG
from core.rules.validate import validate_config


@dataclass(frozen=True)
class Target:
    """A config file a rule can go to; `kind` is `authorizer` (the `--rules` file), `global`, `project`."""

    kind: str
    path: Path

    @property
    def label(self) -> str:
        return {
            "authorizer": "pi-authorizer rules (--rules)",
            "global": "pi global config",
            "project": "pi project config",
        }[self.kind]


@dataclass(frozen=True)
class RuleEdit:
    """What confirming would do to one file: its text before (None when missing) and after."""

    suggestion: Suggestion
    path: Path
    before: str | None
    after: str
    diff: str = field(repr=False)


def targets(rules: PolicyStore) -> list[Target]:
    """The `--rules` file first (the default), then the pi layers, which only a person picks."""
    found = []
    if rules.rules_file is not None:
        found.append(Target("authorizer", rules.rules_file))
    found.append(Target("global", rules.agent_dir / EXTENSION))
    if rules.project_dir is not None:
        found.append(Target("project", rules.project_dir / PROJECT_CONFIG))
    return found


def preview(suggestion: Suggestion, path: Path, rules: PolicyStore | None = None) -> RuleEdit:
    """The file's text with the rule appended last in its surface (so it wins there), and the diff.
    With `rules`: refused when the file holds a change not in force (held or declined), which
    writing into it would apply unseen."""
    if rules is not None:
        why = rules.unapplied_change(path)
        if why is not None:
            raise SuggestionRefused(why)
    before = path.read_text(encoding="utf-8") if path.exists() else None
    if before is not None and strip_comments(before) != before:
        raise SuggestionRefused(f"{path} has comments, which rewriting would lose: add the rule by hand")
    try:
        document = json.loads(before) if before and before.strip() else {}
    except json.JSONDecodeError as exc:
        raise SuggestionRefused(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise SuggestionRefused(f"{path} does not hold a JSON object")
    permission = document.setdefault("permission", {})
    if not isinstance(permission, dict):
        raise SuggestionRefused(f"{path}: 'permission' is not an object")
    current = permission.get(suggestion.surface)
    if isinstance(current, str):
        current = {"*": current}  # a bare state is shorthand for {"*": state}
    if current is None:
        current = {}
    if not isinstance(current, dict):
        raise SuggestionRefused(f"{path}: permission.{suggestion.surface} is not an object")
    existing = current.pop(suggestion.pattern, None)
    if existing is not None and existing != "ask" and (suggestion.state == "allow" or existing == "deny"):
        raise SuggestionRefused(f"{path} already sets {suggestion.pattern!r} to {json.dumps(existing)}")
    current[suggestion.pattern] = suggestion.state
    permission[suggestion.surface] = current
    errors = validate_config(document, str(path))
    if errors:
        raise SuggestionRefused("; ".join(str(e) for e in errors))
    after = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return RuleEdit(suggestion, path, before, after, unified_diff(before, after, path))


def unified_diff(before: str | None, after: str, path: Path) -> str:
    """One line per diff line, also when `before` has no final newline (said as `diff` says it,
    instead of its last line glued to the next: `-}+}`)."""
    old = (before or "").splitlines()
    lines = list(difflib.unified_diff(
        old, after.splitlines(), fromfile=f"{path} (before)" if before is not None else "/dev/null",
        tofile=str(path), lineterm="",
    ))
    if before and not before.endswith(("\n", "\r")):
        last = f"-{old[-1]}"
        for index in range(len(lines) - 1, 1, -1):
            if lines[index] == last:
                lines.insert(index + 1, "\\ No newline at end of file")
                break
    return "".join(line + "\n" for line in lines)


def apply(
    suggestion: Suggestion, path: Path, confirmed: RuleEdit | None = None, rules: PolicyStore | None = None
) -> RuleEdit:
    """Write the rule: only after the person confirmed `confirmed` (the file's bytes must be the ones
    the preview was made from), re-checking the deny guard against the config as it is now when
    `rules` is given. What is applied is exactly the text written (the diff shown), never a re-read
    of the file."""
    if rules is not None and suggestion.state == "allow":  # a deny never loosens one
        why = shadowed_deny(rules, suggestion.surface, suggestion.pattern, suggestion.agents)
        if why is not None:
            raise SuggestionRefused(f"this allow would loosen an explicit deny: {why}")
    change = preview(suggestion, path, rules)
    if confirmed is not None and (confirmed.before, confirmed.after) != (change.before, change.after):
        raise SuggestionRefused(f"{path} changed since the preview; review the new diff")
    _replace_atomically(path, change.after.encode("utf-8"))
    if rules is not None:
        rules.apply_written(path, change.after)  # the person reviewed this diff: exactly it applies
    return change


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write-then-rename beside the file (keeping its mode), then make the rename durable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else FILE_MODE
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        replace_file(fd, path.name, data, mode)
        platform.full_fsync(fd)
    finally:
        os.close(fd)
