"""A stop signal arriving as `serve`'s event loop closes (a second Ctrl+C, a supervisor's SIGTERM
while serving winds down): the loop is closed, its signal handlers not removed yet (asyncio's
`close` removes them after the loop is closed), and the Python-level handler `install_stop_signals`
adds must not ask the closed loop for a stop ("RuntimeError: Event loop is closed" raised out of
`asyncio.run`: a traceback and exit status 1 instead of a clean stop, the handlers left in place;
review3, finding 2). The moment is made by a loop that raises the signal just as it removes its first
handler; in a child process, so this test's own process keeps its handlers and descriptors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, signal, sys
from pathlib import Path
from core.serving import ServingCore
from core.vocabulary.asks import DenyingArbiter
from tui.commands.node import install_stop_signals

class SignalledAsItCloses(asyncio.SelectorEventLoop):
    # a SIGTERM reaches it as it closes: closed already, its handlers not removed yet
    def remove_signal_handler(self, sig):
        if self.is_closed() and sig == signal.SIGINT:
            signal.raise_signal(signal.SIGTERM)
        return super().remove_signal_handler(sig)

root = Path(sys.argv[1])
(root / "root").mkdir()

async def serve() -> None:
    core = ServingCore(root / "root", root / "state", DenyingArbiter())
    install_stop_signals(core)
    core.stop()
    await core.run()

with asyncio.Runner(loop_factory=SignalledAsItCloses) as runner:
    runner.run(serve())
print("stopped")
"""

#: A bound for "never" (the child does nothing that waits).
CHILD_TIMEOUT_S = 60.0


def test_a_stop_signal_as_the_loop_closes_still_stops_cleanly(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT_S, check=False)
    assert "Event loop is closed" not in done.stderr, done.stderr
    assert (done.returncode, done.stdout.strip()) == (0, "stopped"), done.stderr
