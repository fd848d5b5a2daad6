"""The session folder layout and its encoding agree with the real package."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.harness import NodeDriver
from tests.interop.ids import ODD_SESSION, ODD_SESSION_FOLDER, UUID_SESSION

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

# Ids chosen to hit every class encodeURIComponent treats specially.
IDS = [
    UUID_SESSION,
    ODD_SESSION,
    "  padded id\t",
    "a+b=c&d?e#f%g",
    "!~*'()-_.",
    '[]{}<>|\\^`"',
    "emoji 🙂 and 中文",
    "colon:semi;comma,at@dollar$",
]
REFUSED = ["", "   ", "unknown", " UNKNOWN ", "Unknown"]


def test_odd_session_id_folder(node_driver: NodeDriver, tmp_path: Path) -> None:
    from core.disk.paths import encode_session_id

    assert encode_session_id(ODD_SESSION) == ODD_SESSION_FOLDER
    [entry] = node_driver.run("location.ts", [str(tmp_path), ODD_SESSION]).json_line()
    root = tmp_path / "sessions" / ODD_SESSION_FOLDER
    assert entry["location"] == {
        "sessionId": ODD_SESSION,
        "sessionRootDir": str(root),
        "requestsDir": str(root / "requests"),
        "responsesDir": str(root / "responses"),
        "label": "primary",
    }


def test_encoding_matches_package_for_awkward_ids(node_driver: NodeDriver, tmp_path: Path) -> None:
    from core.disk.paths import encode_session_id, normalize_session_id

    entries = node_driver.run("location.ts", [str(tmp_path), *IDS]).json_line()
    assert [e["input"] for e in entries] == IDS
    for entry in entries:
        sid = entry["input"]
        assert normalize_session_id(sid) == entry["normalized"]
        folder = Path(entry["location"]["sessionRootDir"])
        assert folder.parent == tmp_path / "sessions"
        assert encode_session_id(sid) == folder.name, sid


def test_refused_ids_agree_with_package(node_driver: NodeDriver, tmp_path: Path) -> None:
    from core.disk.paths import InvalidSessionId, encode_session_id

    entries = node_driver.run("location.ts", [str(tmp_path), *REFUSED]).json_line()
    for entry in entries:
        assert entry["normalized"] is None
        assert entry["location"] is None
        with pytest.raises(InvalidSessionId):
            encode_session_id(entry["input"])
