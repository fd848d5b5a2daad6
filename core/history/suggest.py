"""Rules offered from repetition: what the person keeps approving, as one allow rule to confirm.

An offer is only computed here; nothing is written until `apply` is called with the file the person
confirmed, after seeing `preview` (the JSON, the file, the diff). An offer that would loosen an
explicit deny of this node's config, or that the person's own denials contradict, is never made.

Size: over 250 lines on purpose: offering, previewing and writing a rule are one workflow with one deny
guard, checked when the rule is offered and again when it is written.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.files import replace_file
from core.history.rows import APPROVED_STATES, HistoryRow
from core.history.store import HistoryStore
from core.rules.config import PolicyStore
from core.rules.evaluate import any_value
from core.rules.jsonc import strip_comments
from core.rules.matcher import compile_wildcard, expand_home
from core.rules.model import PATH_SURFACES, family_members
from core.rules.policy import Policy
from core.rules.session import find_shadowed_deny
from core.rules.sources import EXTENSION, PROJECT_CONFIG
from core.rules.validate import validate_config
from core.tree import FILE_MODE

DEFAULT_THRESHOLD = 5
RECENT_DECISIONS = 5000


@dataclass(frozen=True)
class Suggestion:
    """Allow `pattern` on `surface`: the person approved `approvals` asks it covers."""

    surface: str
    pattern: str
    approvals: int
    agents: tuple[str, ...]
    examples: tuple[str, ...]
    last_at: float

    def rule_json(self) -> dict[str, Any]:
        return {"permission": {self.surface: {self.pattern: "allow"}}}


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
class Change:
    """What confirming would do to one file: its text before (None when missing) and after."""

    suggestion: Suggestion
    path: Path
    before: str | None
    after: str
    diff: str = field(repr=False)


class SuggestionRefused(Exception):
    """The rule cannot be written to that file (comments, a deny it would loosen, a changed file...)."""


def targets(rules: PolicyStore) -> list[Target]:
    """The `--rules` file first (the default), then the pi layers, which only a person picks."""
    found = []
    if rules.rules_file is not None:
        found.append(Target("authorizer", rules.rules_file))
    found.append(Target("global", rules.agent_dir / EXTENSION))
    if rules.project_dir is not None:
        found.append(Target("project", rules.project_dir / PROJECT_CONFIG))
    return found


def suggest(
    history: HistoryStore,
    rules: PolicyStore,
    threshold: int = DEFAULT_THRESHOLD,
    recent: int = RECENT_DECISIONS,
) -> list[Suggestion]:
    """Patterns covering at least `threshold` of the person's recent approvals, most approved first."""
    decided = [r for r in history.query(limit=recent * 4) if r.outcome in ("user", "user_grant")][:recent]
    approved: dict[tuple[str, str], list[HistoryRow]] = {}
    for row in decided:
        if row.verdict in APPROVED_STATES:
            for key in _candidate_patterns(row):
                approved.setdefault(key, []).append(row)
    denied = [r for r in decided if r.verdict is not None and r.verdict not in APPROVED_STATES]
    every_agent = set(history.distinct("agent"))
    offers = []
    for (surface, pattern), rows in approved.items():
        if len(rows) < threshold:
            continue
        agents = tuple(sorted({r.agent or "" for r in rows}))
        if _contradicted(rules.home, surface, pattern, denied):
            continue
        if shadowed_deny(rules, surface, pattern, every_agent | set(agents)) is not None:
            continue
        if all(_already_allowed(rules.policy(r.agent or ""), surface, r.value or "") for r in rows):
            continue
        examples = tuple(dict.fromkeys(r.value or "" for r in rows))[:5]
        offers.append(Suggestion(surface, pattern, len(rows), agents, examples, rows[0].arrived_at))
    offers.sort(key=lambda s: (-s.approvals, -s.last_at))
    return offers


def suggestion_from_ask(
    rules: PolicyStore,
    surface: str | None,
    match_values: Sequence[str],
    session_grants: Sequence[tuple[str, str]],
    agent: str,
    at: float,
) -> Suggestion:
    """The allow rule that would have decided this one ask: the child's own session suggestion when
    it sent one (it covers the ask), else the exact value. Raises `SuggestionRefused` when no rule
    could match it (no child-fixed facts), when one rule cannot cover it, or when the rule would
    loosen an explicit deny of this node's config."""
    if surface is None:
        raise SuggestionRefused("the ask carries no child-fixed facts: no rule of this node could match it")
    candidates = [(s, p) for s, p in session_grants if s and p]
    if not candidates:
        values = list(dict.fromkeys(match_values))
        if surface in PATH_SURFACES and values:
            values = values[:1]  # a path's alias set names one file: its first (absolute) form
        if len(values) != 1:
            raise SuggestionRefused("the ask has several values and no child suggestion covering them")
        if set(values[0]) & {"*", "?"}:
            raise SuggestionRefused("the value holds wildcard characters, so an exact rule cannot be written")
        candidates = [(surface, values[0])]
    rule_surface, pattern = candidates[0]
    why = shadowed_deny(rules, rule_surface, pattern, {agent, ""})
    if why is not None:
        raise SuggestionRefused(f"this allow would loosen an explicit deny: {why}")
    return Suggestion(rule_surface, pattern, 1, (agent,), tuple(match_values[:5]), at)


def shadowed_deny(rules: PolicyStore, surface: str, pattern: str, agents: Iterable[str]) -> str | None:
    """The explicit deny this allow would override for any of `agents` (the rules engine's check)."""
    for agent in sorted(agents):
        found = find_shadowed_deny(rules.policy(agent), surface, pattern)
        if found is not None:
            return found.describe()
    return None


def preview(suggestion: Suggestion, path: Path) -> Change:
    """The file's text with the rule appended last in its surface (so it wins there), and the diff."""
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
    if existing is not None and existing != "ask":
        raise SuggestionRefused(f"{path} already sets {suggestion.pattern!r} to {json.dumps(existing)}")
    current[suggestion.pattern] = "allow"
    permission[suggestion.surface] = current
    errors = validate_config(document, str(path))
    if errors:
        raise SuggestionRefused("; ".join(str(e) for e in errors))
    after = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    diff = "".join(
        difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{path} (before)" if before is not None else "/dev/null",
            tofile=str(path),
        )
    )
    return Change(suggestion, path, before, after, diff)


def apply(
    suggestion: Suggestion, path: Path, confirmed: Change | None = None, rules: PolicyStore | None = None
) -> Change:
    """Write the rule: only after the person confirmed `confirmed` (the file must not have changed
    since), re-checking the deny guard against the config as it is now when `rules` is given."""
    if rules is not None:
        why = shadowed_deny(rules, suggestion.surface, suggestion.pattern, suggestion.agents)
        if why is not None:
            raise SuggestionRefused(f"this allow would loosen an explicit deny: {why}")
    change = preview(suggestion, path)
    if confirmed is not None and (confirmed.before, confirmed.after) != (change.before, change.after):
        raise SuggestionRefused(f"{path} changed since the preview; review the new diff")
    _replace_atomically(path, change.after.encode("utf-8"))
    if rules is not None:
        rules.apply_confirmed(path)  # the person reviewed this diff: not a silent widening
    return change


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write-then-rename beside the file (keeping its mode), then make the rename durable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else FILE_MODE
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        replace_file(fd, path.name, data, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def _candidate_patterns(row: HistoryRow) -> list[tuple[str, str]]:
    """The child's own session suggestion when it sent one, else the exact value it asked for."""
    facts = row.facts_json()
    grants = facts.get("sessionApproval")
    if isinstance(grants, list) and grants:
        return [(g["surface"], g["pattern"]) for g in grants if isinstance(g, dict) and g.get("pattern")]
    intent = facts.get("accessIntent")
    if isinstance(intent, dict) and row.surface and row.value and not set(row.value) & {"*", "?"}:
        return [(row.surface, row.value)]
    return []


def _contradicted(home: str, surface: str, pattern: str, denied: Sequence[HistoryRow]) -> bool:
    """The person denied something this pattern would allow."""
    wildcard = compile_wildcard(pattern, home)
    for row in denied:
        if row.surface in (surface, *family_members(surface)):
            value = row.value or ""
            if wildcard.matches(expand_home(value, home) if surface in PATH_SURFACES else value):
                return True
    return False


def _already_allowed(policy: Policy, surface: str, value: str) -> bool:
    """This node's rules already allow the value: offering a rule for it would change nothing."""
    for member in family_members(surface):
        matched = expand_home(value, policy.home) if member in PATH_SURFACES else value
        if any_value(policy.candidates(member), (matched,), (value,)).rule.action != "allow":
            return False
    return True
