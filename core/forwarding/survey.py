"""Every session inbox under a forwarding root, and who (if anyone) serves it.

Children whose parent died or never served wait out their whole timeout; listing the unserved
inboxes that hold requests lets a person adopt them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.disk.tree import Anchor, UnsafeFolder
from core.forwarding.liveness import read_heartbeat_in

ServingState = Literal["alive", "stale", "dead_pid", "absent"]


@dataclass(frozen=True)
class InboxStatus:
    folder: str
    session_id: str
    serving: ServingState
    serving_pid: int | None
    waiting: int
    problem: str | None = None
    #: Why another server is believed to answer it, in words (its evidence): this node does not.
    other_server: str | None = None

    @property
    def stuck(self) -> bool:
        """Unserved with children waiting: nobody will answer them before their timeout."""
        return self.serving != "alive" and self.waiting > 0


#: Folders a survey looks into (a child may make ~96k empty ones): each costs a listing and a read.
MAX_SURVEYED = 1_000


def survey_inboxes(
    forwarding_root: Path, anchor: Anchor | None = None, clock: Clock = SYSTEM_CLOCK,
    limit: int = MAX_SURVEYED,
) -> list[InboxStatus]:
    """One status per folder under `sessions/`, sorted by name (read by descriptor, never through a
    link); at most `limit` folders are looked into (the first by name), so a root full of folders
    costs a bounded survey."""
    tree = anchor or Anchor(forwarding_root, "forwarding root")
    try:
        with tree.folder(("sessions",)) as fd:
            folders = sorted(os.listdir(fd))[:limit]
    except (FileNotFoundError, UnsafeFolder):
        return []
    now_ms = wall_ms(clock)
    out: list[InboxStatus] = []
    for folder in folders:
        session_id = unquote(folder, errors="replace")
        problem: str | None = None
        try:
            with tree.folder(("sessions", folder, "requests")) as fd:
                waiting = sum(1 for n in os.listdir(fd) if n.endswith(".json"))
        except UnsafeFolder as exc:
            waiting, problem = 0, str(exc)
        except OSError:
            waiting = 0
        try:
            record = read_heartbeat_in(tree, session_id)
        except ValueError:
            record = None
        state: ServingState = "absent" if record is None else record.state(now_ms)
        other = None
        if record is not None and state == "alive":
            age = (now_ms - record.updated_at_ms) / 1000
            other = f"a heartbeat in serving/ naming live pid {record.pid}, updated {max(age, 0):.0f} s ago"
        out.append(
            InboxStatus(
                folder=folder,
                session_id=session_id,
                serving=state,
                serving_pid=None if record is None else record.pid,
                waiting=waiting,
                problem=problem,
                other_server=other,
            )
        )
    return out
