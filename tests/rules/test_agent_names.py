"""The one check of child-reported agent names: the judgment and the app read the same reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.rules.agent_names import pi_opens, suspicious_agent_reason
from tests.rules.support import ODD_NAMES, USABLE, Layout


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
