"""argparse types: each checks one kind of command-line value now, so a typo is a usage error."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from core.disk.paths import InvalidSessionId, normalize_session_id
from core.judging.links import parse_link_spec

_Number = TypeVar("_Number", int, float)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


class CliError(Exception):
    """Command-line input this command cannot use: printed as one line (no traceback), exit 2."""


def duration_arg(text: str) -> float:
    """`90s`, `15m`, `2h`, `7d`, `1w` or a sum like `1h30m` (seconds)."""
    cleaned = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", cleaned):
        return float(cleaned)
    if not cleaned or _PART.sub("", cleaned):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 90s, 15m, 2h, 7d or 1h30m")
    return sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(cleaned))


def session_id_arg(raw: str) -> str:
    """A session id pi would accept, or a usage error saying why not."""
    try:
        session_id = normalize_session_id(raw)
    except InvalidSessionId as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if session_id in {".", ".."}:
        # encodeURIComponent leaves dots alone: the inbox would be `sessions/..`, outside the tree.
        raise argparse.ArgumentTypeError(f"session id {raw!r} would name a folder outside sessions/")
    return session_id


def _number(raw: str, parse: Callable[[str], _Number], noun: str) -> _Number:
    try:
        return parse(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a {noun}") from None


def non_negative_int(raw: str) -> int:
    """A whole number >= 0."""
    value = _number(raw, int, "whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} is negative")
    return value


def positive_float(raw: str) -> float:
    """A number of seconds > 0."""
    value = _number(raw, float, "number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{raw!r} must be a positive number of seconds")
    return value


def existing_file(raw: str) -> Path:
    """A file that exists now (a missing rules file is a typo, not an empty config)."""
    path = Path(raw).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{raw}: no such file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{raw}: not a regular file")
    return path


def one_of(noun: str, choices: Sequence[str]) -> Callable[[str], str]:
    """One of `choices`, or a usage error naming the closest one and the rest."""

    def parse(raw: str) -> str:
        if raw in choices:
            return raw
        close = difflib.get_close_matches(raw, choices, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise argparse.ArgumentTypeError(f"{raw!r} is not a {noun}; {hint}one of: {', '.join(choices)}")

    parse.__name__ = noun  # argparse names the type in its messages
    return parse


def link_spec_arg(raw: str) -> str:
    """`NAME=COMMAND`, checked now so a typo is not found at the first ask."""
    try:
        parse_link_spec(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return raw
