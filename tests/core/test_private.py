"""Files that hold a secret (`core/disk/private.py`): one check for the API key, the broker's password
and access files and a node's key; each refusal names the path and why, never the contents."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.disk.private import NotPrivate, read_private


def secret(tmp_path: Path, data: bytes = b"s3cret", mode: int = 0o600) -> Path:
    path = tmp_path / "secret"
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_a_private_file_of_this_user_is_read(tmp_path: Path) -> None:
    assert read_private(secret(tmp_path), "key", 64) == b"s3cret"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_a_file_group_or_others_may_read_is_refused_without_its_contents(tmp_path: Path, mode: int) -> None:
    with pytest.raises(NotPrivate, match="readable by others") as refused:
        read_private(secret(tmp_path, mode=mode), "key", 64)
    assert "s3cret" not in str(refused.value) and "chmod 600" in str(refused.value)


def test_a_link_a_folder_and_a_fifo_are_refused(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(secret(tmp_path))
    with pytest.raises(NotPrivate, match="symbolic link"):
        read_private(link, "key", 64)
    folder = tmp_path / "folder"
    folder.mkdir(mode=0o700)
    with pytest.raises(NotPrivate, match="not a regular file"):
        read_private(folder, "key", 64)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer end, so opening to read returns at once
    try:
        with pytest.raises(NotPrivate, match="not a regular file"):
            read_private(fifo, "key", 64)
    finally:
        os.close(writer)


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotPrivate, match="over 4 bytes"):
        read_private(secret(tmp_path), "key", 4)


def test_a_missing_file_says_it_cannot_be_opened(tmp_path: Path) -> None:
    with pytest.raises(NotPrivate, match="the key cannot be opened"):
        read_private(tmp_path / "absent", "key", 64)


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    path = secret(tmp_path)
    os.chown(path, 65534, 65534)
    with pytest.raises(NotPrivate, match="owned by another user"):
        read_private(path, "key", 64)
