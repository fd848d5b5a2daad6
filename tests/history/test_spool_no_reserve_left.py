"""The reserve is held in parts (`spool.RESERVE_PARTS`), given up one at a time: a stop on a full disk
takes the parts its spool needs and leaves the others for the next stop. With every part given up and
the disk still full, the spool being replaced is never replaced by a shorter one: what it holds (an
earlier run's closes, queued first) stays. A real full disk: a small tmpfs in a private mount
namespace, in a child process."""

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
    spool.keep_reserve(history)
    parts = lambda: sorted(p.name for p in fs.iterdir() if ".reserve" in p.name)
    held = parts()
    first = fill(fs)
    spool.save(history, [spooled_close(i) for i in range(50)])  # full: one part given up
    after_one = parts()
    more = [spooled_close(i) for i in range(50)]
    more += [spooled_close(i, os.urandom(600).hex()) for i in range(50, 400)]
    spool.save(history, more)  # still full: the other parts given up, then what fits, never fewer
    kept = [e.key.name for e in spool.load(history)]
    print(json.dumps({"held": held, "after_one": after_one, "left": parts(), "kept": kept}))
"""


def test_a_stop_takes_the_parts_it_needs_and_never_keeps_fewer_than_before(tmp_path: Path) -> None:
    said = in_private_mounts(["-c", CHILD, str(tmp_path)], 300)
    assert len(said["held"]) == 4
    assert len(said["after_one"]) == 3  # a small spool took one part; three are left for the next stop
    assert said["left"] == []
    kept = said["kept"]
    assert kept[:50] == [f"r{i}.json" for i in range(50)]  # the earlier spool's, never given up
    assert 50 <= len(kept) < 400


GUARD = """
import json, os, sys
from pathlib import Path
from core.history import spool
from tests.helpers import fill, small_tmpfs
from tests.history.support import spooled_close

with small_tmpfs(Path(sys.argv[1]), "1m") as fs:
    history = fs / "history.sqlite3"
    spool.save(history, [spooled_close(i) for i in range(50)])  # room: written as it is, no reserve held
    slack = fs / "slack"
    slack.write_bytes(bytes(12 << 10))
    first = fill(fs)
    slack.unlink()  # full but for 12 KiB, and nothing reserved to give up
    queued = [spooled_close(i) for i in range(50)]
    queued += [spooled_close(i, os.urandom(600).hex()) for i in range(50, 400)]
    spool.save(history, queued)  # the earlier run's first (queued first at the start), then this run's
    kept = [e.key.name for e in spool.load(history)]
    print(json.dumps({"kept": kept}))
"""


def test_with_nothing_to_give_up_the_spool_is_not_replaced_by_a_shorter_one(tmp_path: Path) -> None:
    said = in_private_mounts(["-c", GUARD, str(tmp_path)], 300)
    assert said["kept"] == [f"r{i}.json" for i in range(50)]  # not replaced by the few that fit the slack
