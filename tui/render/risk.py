"""Risk at a glance: hint labels computed from an ask's facts. A hint, never a decision.

Nothing here judges: the verdict comes from this node's rules or a person. These labels only draw
the eye to asks that destroy or widen reach (recursive delete, force push, privilege wrappers,
pipes into a shell or interpreter, paths outside the project, secrets-looking paths). They read
the facts exactly as the child sent them (a request without facts is read from its display text,
and says so), with bounded work: at most `MAX_VALUES` values and `MAX_CHARS` characters in all,
split once at separators and words (linear time).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.rules.model import PATH_SURFACES

MAX_VALUES = 64
MAX_CHARS = 16_384
COMMAND_SURFACES = frozenset({"bash"})


@dataclass(frozen=True)
class RiskHint:
    """One hint: a short `label` for a column or badge, and `why` in a sentence."""

    label: str
    why: str


_SEPARATORS = re.compile(r"(\|\||&&|\$\(|[;&|()`\n])")
_WORD_SPLIT = re.compile(r"[\s/=:,'\"]+")
_WRAPPERS = frozenset({"env", "exec", "xargs", "then", "do", "else", "time", "nohup", "nice", "command", "!"})
_PRIVILEGE = frozenset({"sudo", "doas", "su", "pkexec", "runas", "run0"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "perl", "ruby", "node", "php"})
_FETCHERS = frozenset({"curl", "wget"})
_NAME = re.compile(r"[\w.+-]*")
_SECRET_NAME = re.compile(
    r"\.env(?:\.[\w.-]+)?|\.netrc|\.npmrc|\.pypirc|\.git-credentials|\.pgpass"
    r"|id_(?:rsa|dsa|ecdsa|ed25519)|[\w.-]*\.(?:pem|key|p12|pfx|keystore|kdbx)"
    r"|credentials(?:\.json)?|secrets?(?:\.\w+)?|[\w.-]*token[\w.-]*"
    r"|\.ssh|\.gnupg|\.aws|\.kube|\.docker|\.password-store",
    re.IGNORECASE,
)


def risk_hints(
    surface: str,
    values: Sequence[str],
    cwd: str | None = None,
    boundary: str | None = None,
) -> tuple[RiskHint, ...]:
    """The hints for one ask, in a fixed order, each label at most once."""
    texts: list[str] = []
    budget = MAX_CHARS
    for value in [*values[:MAX_VALUES], boundary or ""]:
        if value and budget > 0:
            texts.append(value[:budget])
            budget -= len(texts[-1])
    found: dict[str, RiskHint] = {}

    def add(label: str, why: str) -> None:
        found.setdefault(label, RiskHint(label, why))

    if surface in COMMAND_SURFACES:
        for text in texts:
            for label, why in _command_hints(text):
                add(label, why)
    if surface.startswith("external_directory"):
        add("outside project", "reaches a directory outside the agent's working tree")
    elif surface in PATH_SURFACES and cwd and any(_outside(text, cwd) for text in texts):
        add("outside project", f"a path outside the agent's working directory {cwd[:80]}")
    if any(_SECRET_NAME.fullmatch(word) for text in texts for word in _WORD_SPLIT.split(text) if word):
        add("secrets?", "names a file that often holds credentials or keys")
    return tuple(found.values())


def _command_hints(text: str) -> list[tuple[str, str]]:
    """Split a command line at its separators once (linear), then look at each simple command."""
    hints: list[tuple[str, str]] = []
    parts = _SEPARATORS.split(text)
    previous_head = ""
    separator = ""
    for index, part in enumerate(parts):
        if index % 2:  # a separator
            separator = part
            continue
        words = [w.strip("'\"") for w in part.split()]
        head, args = _head(words, hints)
        if head == "rm" and any(_is_recursive_flag(a) for a in args):
            hints.append(("rm -r", "deletes recursively"))
        elif head == "find" and "-delete" in args:
            hints.append(("rm -r", "deletes recursively (find -delete)"))
        elif head == "git" and "clean" in args and any(a.startswith("-") and "f" in a for a in args):
            hints.append(("rm -r", "deletes untracked files (git clean -f)"))
        elif head == "git" and "push" in args and any(_is_force(a) for a in args):
            hints.append(("force push", "rewrites a remote branch (git push --force)"))
        if separator == "|" and (head in _SHELLS or head.startswith("python")):
            hints.append(("pipe to shell", f"feeds text into {head}"))
        if separator == "$(" and head in _FETCHERS and previous_head in _SHELLS:
            hints.append(("pipe to shell", f"runs what {head} downloads"))
        previous_head = head
    return hints


def _head(words: list[str], hints: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """The command word (its base name) after wrappers such as `sudo` or `env`, and its arguments."""
    position = 0
    while position < len(words):
        # The name as a shell would most likely read it; trailing control text (`sh\x1b[2J`) is
        # cut, so a disguised name still draws the eye (a hint may over-flag, never under-flag).
        name = _NAME.match(posixpath.basename(words[position]))
        word = name.group(0) if name else ""
        if word in _PRIVILEGE:
            hints.append((word, f"runs with other privileges ({word})"))
        elif word and word not in _WRAPPERS and not word.startswith("-") and "=" not in words[position]:
            return word, words[position + 1 :]
        position += 1
    return "", []


def _is_recursive_flag(arg: str) -> bool:
    return arg == "--recursive" or (arg.startswith("-") and not arg.startswith("--") and "r" in arg.lower())


def _is_force(arg: str) -> bool:
    if arg in ("--force", "--force-with-lease") or arg.startswith("--force-with-lease="):
        return True
    return (arg.startswith("-") and not arg.startswith("--") and "f" in arg) or arg.startswith("+")


def _outside(path: str, cwd: str) -> bool:
    """True when `path` (absolute, `~`, or relative to `cwd`) is not inside `cwd`."""
    text = path.strip()
    if not text:
        return False
    if text.startswith("~"):
        return True
    joined = text if text.startswith("/") else posixpath.join(cwd, text)
    resolved = posixpath.normpath(joined)
    base = posixpath.normpath(cwd)
    return not (resolved == base or resolved.startswith(base.rstrip("/") + "/"))
