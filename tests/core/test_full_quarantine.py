"""A quarantine folder that is really full for a while (campaign3, finding 3): a file serving cannot use
(a request whose response someone else wrote first, a request cut short) is set aside once the
quarantine has space again, as a full disk's answers are written once it allows: a transient I/O error
waits and is retried, the file is never left in the inbox for good. A real `serve`, the quarantine a
small tmpfs in a private mount namespace (`tests/core/full_quarantine_driver.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import in_private_mounts


@pytest.mark.timeout(240)
def test_unusable_files_are_set_aside_once_the_full_quarantine_has_space_again(tmp_path: Path) -> None:
    seen = in_private_mounts(["-m", "tests.core.full_quarantine_driver", str(tmp_path)], 200)
    tail = seen["log_tail"]
    assert seen["alive"] is True, tail
    assert seen["requests_left"] == [], f"left in the inbox after the quarantine had space: {tail}"
    assert seen["reasons"] == ["broken.json.reason.json", "forged.json.reason.json"], tail
