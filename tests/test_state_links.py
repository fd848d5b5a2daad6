"""Files pi-authorizer keeps in its state dir are never written through a link planted in their place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.history import HistoryStore
from tui.commands.app_command import log_to_file
from tui.commands.options import DEFAULT_SESSION_FILE, default_session_id


def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("keep me")
    return path


def test_default_session_id_replaces_a_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = victim(tmp_path)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / DEFAULT_SESSION_FILE).symlink_to(target)
    minted = default_session_id(tmp_path / "state")
    assert target.read_text() == "keep me"
    assert not (tmp_path / "state" / DEFAULT_SESSION_FILE).is_symlink()
    assert default_session_id(tmp_path / "state") == minted


def test_app_log_and_history_file_refuse_a_link(tmp_path: Path) -> None:
    target = victim(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    (state / "app.log").symlink_to(target)
    (state / "history.sqlite3").symlink_to(target)
    with pytest.raises(OSError):
        log_to_file(state, verbose=False)
    with pytest.raises(OSError):
        HistoryStore(state / "history.sqlite3")
    assert target.read_text() == "keep me"
    assert sorted(os.listdir(state)) == ["app.log", "history.sqlite3"]
