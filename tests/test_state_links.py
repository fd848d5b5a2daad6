"""Files pi-authorizer keeps in its state dir are never written through a link planted in their place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.history import HistoryStore
from tui.commands.app_command import log_to_file
from tui.commands.own_session import OWN_SESSIONS_DIR, default_session_id, root_key


def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("keep me")
    return path


def test_default_session_id_replaces_a_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = victim(tmp_path)
    root = tmp_path / "root"
    kept = tmp_path / "state" / OWN_SESSIONS_DIR / root_key(root)
    kept.parent.mkdir(parents=True)
    kept.symlink_to(target)
    minted = default_session_id(tmp_path / "state", root)
    assert target.read_text() == "keep me"
    assert not kept.is_symlink()
    assert default_session_id(tmp_path / "state", root) == minted


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
