"""`python -m tui.screenshots`: every screenshot is written, is an SVG, and shows its screen."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tui import screenshots

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed check: a loaded CI machine is slow

# Rich writes a space in SVG text as `&#160;`; one word per screen is enough to tell them apart.
EXPECTED = {
    "queue.svg": "askingUnits",
    "path-ask.svg": "src/auth/session.ts",
    "no-facts.svg": "CHILD-FIXED",
    "hostile.svg": "PWNED",
    "help.svg": "Deciding",
    "sessions.svg": "019ff96b-2222-7000-8000-bbbbbbbbbbbb",
    "deny-with-reason.svg": "CI&#160;passes",
    "review.svg": "denied_with_reason",
    "grants.svg": "answering",
    "batch-preview.svg": "Exactly&#160;what&#160;will&#160;be&#160;decided",
    "queue-80x24.svg": "…+",
}


def test_every_screenshot_is_an_svg_of_its_screen(tmp_path: Path) -> None:
    written = screenshots.generate(tmp_path / "out")
    assert [path.name for path in written] == list(screenshots.SHOTS)
    assert set(EXPECTED) == set(screenshots.SHOTS)
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert text.startswith("<svg"), path.name
        assert EXPECTED[path.name] in text, path.name
        assert tempfile.gettempdir() not in text, path.name  # no shot shows where it was made
    assert "median&#160;person&#160;decision" in (tmp_path / "out" / "review.svg").read_text(encoding="utf-8")
