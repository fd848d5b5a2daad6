"""Every session inbox under a forwarding root, and who (if anyone) serves it.

Children whose parent died or never served wait out their whole timeout; listing the unserved
inboxes that hold requests lets a person adopt them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote

from core.liveness import heartbeat_path, read_heartbeat

ServingState = Literal["alive", "stale", "dead_pid", "absent"]


@dataclass(frozen=True)
class InboxStatus:
    folder: str
    session_id: str
    serving: ServingState
    serving_pid: int | None
    waiting: int

    @property
    def stuck(self) -> bool:
        """Unserved with children waiting: nobody will answer them before their timeout."""
        return self.serving != "alive" and self.waiting > 0


def survey_inboxes(forwarding_root: Path) -> list[InboxStatus]:
    """One status per folder under `sessions/`, sorted by folder name."""
    sessions = forwarding_root / "sessions"
    try:
        folders = sorted(os.listdir(sessions))
    except (FileNotFoundError, NotADirectoryError):
        return []
    now_ms = time.time_ns() / 1_000_000
    out: list[InboxStatus] = []
    for folder in folders:
        session_id = unquote(folder, errors="replace")
        try:
            waiting = sum(1 for n in os.listdir(sessions / folder / "requests") if n.endswith(".json"))
        except OSError:
            waiting = 0
        try:
            record = read_heartbeat(heartbeat_path(forwarding_root, session_id))
        except ValueError:
            record = None
        state: ServingState = "absent" if record is None else record.state(now_ms)
        out.append(
            InboxStatus(
                folder=folder,
                session_id=session_id,
                serving=state,
                serving_pid=None if record is None else record.pid,
                waiting=waiting,
            )
        )
    return out
