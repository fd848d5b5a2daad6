"""The `pi-authorizer` command's first step: on a system it cannot run on (Windows), one line that says
so and what works instead (WSL), before importing anything that would fail there with a traceback
(`fcntl`, `resource`, folder descriptors: the whole of `core`). Only `sys` is imported here."""

from __future__ import annotations

import sys
from collections.abc import Sequence

REFUSAL = (
    "pi-authorizer: Windows is not supported (it needs POSIX folder descriptors and file locks); "
    "run it inside WSL, where it works as on Linux"
)


def refusal(system: str) -> str | None:
    """Why pi-authorizer cannot start on `system` (a `sys.platform` value), or None where it can."""
    return REFUSAL if system.startswith(("win", "cygwin", "msys")) else None


def main(argv: Sequence[str] | None = None) -> int:
    message = refusal(sys.platform)
    if message is not None:
        print(message, file=sys.stderr)
        return 1
    from tui.cli import main as run  # only now: it imports everything

    return run(argv)
