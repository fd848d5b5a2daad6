"""This authorizer's own session id, one per forwarding root, and who holds a session that is taken.

A session id is where children send their asks, so it belongs to a forwarding root: a `serve` for one
`PI_CODING_AGENT_DIR` and the app for another must not share one (the state dir is shared, and a
shared id made the second refuse to start). Each root's id is minted once and kept in
`<state>/default-sessions/<digest of the resolved root>`, so an env line stays valid across runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import uuid
from pathlib import Path

from core import platform
from core.disk.entries import read_small, remove, replace_file, temp_name, write_new
from core.disk.paths import InvalidSessionId, default_forwarding_root, normalize_session_id
from core.disk.tree import Anchor
from core.text import log_safe

#: Where each root's own session id is kept, below the state dir.
OWN_SESSIONS_DIR = "default-sessions"
#: The one id earlier versions kept for every root: adopted by the default root, so its env line holds.
LEGACY_SESSION_FILE = "default-session-id"


def root_key(root: Path) -> str:
    """The file name a root's id is kept under: a digest of its resolved path (any path, one name)."""
    resolved = os.path.realpath(root.expanduser())
    return hashlib.sha256(os.fsencode(resolved)).hexdigest()[:32]


def default_session_id(state: Path, root: Path) -> str:
    """The session id this authorizer serves for `root` unless told `--session`: minted once per root.

    Read and written by descriptor: a link in its place is replaced, never followed. Two processes
    minting at once agree: the id is created exclusively and the loser reads the winner's.
    """
    name = root_key(root)
    anchor = Anchor(state, "state dir")
    with anchor.folder((OWN_SESSIONS_DIR,), create=True) as fd:
        for _ in range(3):
            kept = _kept_id(fd, name)
            if kept is not None:
                return kept
            minted = _legacy_id(anchor, root) or f"pi-authorizer-{uuid.uuid4()}"
            record = f"{minted}\n{os.path.realpath(root.expanduser())}\n".encode("utf-8", "surrogateescape")
            if _create(fd, name, record):
                return minted
        # Something unusable keeps taking the name (a link, a folder): replace it with ours.
        with contextlib.suppress(IsADirectoryError):
            replace_file(fd, name, record)
        return minted


def _kept_id(fd: int, name: str) -> str | None:
    data = read_small(fd, name, 8192)
    if data is None:
        return None
    with contextlib.suppress(UnicodeDecodeError, InvalidSessionId):
        return normalize_session_id(data.decode("utf-8").split("\n", 1)[0])
    return None


def _create(fd: int, name: str, data: bytes) -> bool:
    """Put `data` under `name` only if nothing usable is there (a leftover link or junk is replaced)."""
    temp = temp_name(name)
    write_new(fd, temp, data)
    try:
        os.link(temp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        return True
    except FileExistsError:
        if _kept_id(fd, name) is None:
            with contextlib.suppress(OSError):
                os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
                return True
        return False
    finally:
        remove(fd, temp)


def _legacy_id(anchor: Anchor, root: Path) -> str | None:
    """The single id earlier versions kept, for the default root only (the one it served)."""
    if os.path.realpath(root.expanduser()) != os.path.realpath(default_forwarding_root()):
        return None
    with anchor.folder() as fd:
        return _kept_id(fd, LEGACY_SESSION_FILE)


_PID = re.compile(r"\bpid (\d+)\b")


def holder_command(holder: str) -> str | None:
    """The command line of the process a `SessionHeld` names (read from the system now), if live."""
    found = _PID.search(holder)
    if found is None:
        return None
    pid = int(found.group(1))
    words = platform.command_line(pid)
    if words is None and not platform.LINUX:
        words = _ps_command(pid)
    return log_safe(" ".join(words), 200) if words else None


def _ps_command(pid: int) -> list[str]:
    """Where there is no /proc (macOS): `ps`."""
    try:
        done = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return done.stdout.split() if done.returncode == 0 else []


def held_message(session_id: str, holder: str, default: bool) -> str:
    """Why `session_id` is not served here: who holds it (pid and command) and how to serve another."""
    command = holder_command(holder)
    who = f"{log_safe(holder)} ({command})" if command else log_safe(holder)
    other = ("to serve another session beside it, give --session ID (or another --forwarding-root); "
             "`pi-authorizer run -- COMMAND` starts an agent forwarding to it"
             if default else "give another --session ID to serve one of your own beside it")
    return f"not serving {session_id!r}: {who} serves it; {other}"
