"""The one check of child-reported agent names: the judgment and the app read the same reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.rules.agent_names import pi_opens, suspicious_agent_reason
from tests.rules.support import Layout

HIDDEN = "contains control or hidden characters"
#: The odd names both former checks knew of, and the reason each now gets.
ODD_NAMES = {
    "": "empty agent name",
    " \t": "empty agent name",
    "unknown": "named 'unknown' (the child could not tell its agent name)",
    " Unknown ": "named 'unknown' (the child could not tell its agent name)",
    "a\x00b": "contains NUL",
    "sub/x": "contains a path separator",
    "sub\\x": "contains a path separator",
    "..": "contains '..'",
    "a..b": "contains '..'",
    "a\ud800b": "contains a lone surrogate (no file can have that name)",
    "a\tb": HIDDEN,
    "a\nb": HIDDEN,
    "a\x1b[31mb": HIDDEN,
    "a\u200db": HIDDEN,  # zero-width joiner
    "a\u202eb": HIDDEN,  # right-to-left override
    "a\u00a0b": HIDDEN,  # no-break space
    "a\u3164b": HIDDEN,  # Hangul filler (default-ignorable, not Cf)
    "a\ue000b": HIDDEN,  # private use
}
USABLE = ["Explore", "code-reviewer.v2", "a" * 200, "Prüfer", "エージェント"]


@pytest.mark.parametrize(("name", "reason"), ODD_NAMES.items())
def test_an_odd_name_is_suspicious_with_its_reason(tmp_path: Path, name: str, reason: str) -> None:
    assert suspicious_agent_reason(name) == reason
    assert Layout(tmp_path).store().policy(name).suspicious_agent_reason == reason


@pytest.mark.parametrize("name", USABLE)
def test_an_ordinary_name_is_usable(tmp_path: Path, name: str) -> None:
    assert suspicious_agent_reason(name) is None
    assert Layout(tmp_path).store().policy(name).suspicious_agent_reason is None


def test_pi_opens_a_file_for_most_odd_names() -> None:
    opened = {name for name in ODD_NAMES if pi_opens(name)}
    assert opened == set(ODD_NAMES) - {"", "a\x00b", "a\ud800b"}
