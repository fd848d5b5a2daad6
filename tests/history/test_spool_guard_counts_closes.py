"""With the reserve all given up, a stop's spool is never replaced by one holding fewer fail-safe
closes than it holds: the guard counts the closes on both sides. Counting every line of the spool
being replaced (its arrivals too, which the next start serves again) against the closes that fit, an
earlier spool of many arrivals and one close was kept over one holding that close and a hundred more:
their children read those denials, and the next start called them withdrawn. A real full disk: a
small tmpfs in a private mount namespace, in a child process."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import in_private_mounts

CHILD = """
import json, os, sys
from pathlib import Path
from core.history import spool
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from tests.helpers import fill, small_tmpfs
from tests.history.support import spooled_close

def arrival(i, message):
    raw = json.dumps({"id": f"a{i}", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                      "requesterAgentName": "Explore", "message": message, "surface": "bash",
                      "value": f"make {i}"}).encode()
    return ServeEvent("arrived", AskKey("s", f"a{i}.json"), 5.0 + i, parse_request(raw), raw=raw)

with small_tmpfs(Path(sys.argv[1]), "1m") as fs:
    history = fs / "history.sqlite3"
    earlier = [arrival(i, "make") for i in range(200)] + [spooled_close(0)]
    spool.save(history, earlier)  # room: 200 arrivals and one close, no reserve held
    slack = fs / "slack"
    slack.write_bytes(bytes(64 << 10))
    fill(fs)
    slack.unlink()  # full but for 64 KiB, and nothing reserved to give up
    queued = earlier + [spooled_close(i) for i in range(1, 101)]
    queued += [arrival(i, os.urandom(600).hex()) for i in range(200, 600)]  # far beyond the space left
    spool.save(history, queued)
    kept = [e.key.name for e in spool.load(history) if e.kind == "answered"]
    print(json.dumps({"kept": kept}))
"""


def test_the_closes_that_fit_replace_a_spool_of_fewer_closes_and_more_arrivals(tmp_path: Path) -> None:
    said = in_private_mounts(["-c", CHILD, str(tmp_path)], 300)
    assert said["kept"] == [f"r{i}.json" for i in range(101)]
