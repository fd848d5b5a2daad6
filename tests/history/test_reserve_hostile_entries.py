"""The reserve's names in the state dir may hold what this program did not write (a folder, a link):
the state dir is the user's own, so such an entry is left alone and the reserve is held in the parts
still free, and given up from them at a stop on a full disk. A folder under the single file's name an
older version held made the start raise (no part was held) and each stop's spool raise with it. A real
full disk: a small tmpfs in a private mount namespace, in a child process."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import in_private_mounts

CHILD = """
import json, os, sys
from pathlib import Path
from core.history import spool
from tests.helpers import fill, small_tmpfs
from tests.history.support import spooled_close

with small_tmpfs(Path(sys.argv[1]), "1m") as fs:
    history = fs / "history.sqlite3"
    (fs / "history.sqlite3.reserve").mkdir()
    (fs / "history.sqlite3.reserve.3").mkdir()
    (fs / "history.sqlite3.reserve.3" / "mine").write_bytes(b"the user's")
    started = "held"
    try:
        spool.keep_reserve(history)
    except OSError as exc:
        started = type(exc).__name__
    parts = sorted(p.name for p in fs.iterdir() if ".reserve." in p.name and p.is_file())
    fill(fs)
    try:
        spool.save(history, [spooled_close(i) for i in range(50)])
        stopped = "saved"
    except OSError as exc:
        stopped = type(exc).__name__
    kept = [e.key.name for e in spool.load(history)]
    print(json.dumps({"started": started, "parts": parts, "stopped": stopped, "kept": kept,
                      "folders": sorted(p.name for p in fs.iterdir() if p.is_dir()),
                      "mine": (fs / "history.sqlite3.reserve.3" / "mine").read_bytes().decode()}))
"""


def test_a_folder_under_a_reserve_name_is_left_and_the_other_parts_serve(tmp_path: Path) -> None:
    said = in_private_mounts(["-c", CHILD, str(tmp_path)], 300)
    assert said["started"] == "held"
    assert said["parts"] == [f"history.sqlite3.reserve.{k}" for k in range(3)]
    assert said["stopped"] == "saved"
    assert said["kept"] == [f"r{i}.json" for i in range(50)]
    assert said["folders"] == ["history.sqlite3.reserve", "history.sqlite3.reserve.3"]
    assert said["mine"] == "the user's"
