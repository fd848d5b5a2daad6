"""What every stage of serving reaches, wired once by `ServingCore`, so no stage takes a long list."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass

from core.clock import Clock
from core.serving.asks import Arbiter
from core.serving.events import ServeEvent
from core.serving.reconcile import Reconcile
from core.serving.sessions import ServedSession, Sessions

Spawn = Callable[[Coroutine[object, object, None], bool], "asyncio.Task[None]"]
"""Run a coroutine alongside; `True`: it serves a file and is let finish at shutdown."""


@dataclass(frozen=True)
class Shared:
    """What the stages of serving all reach (wired once by `ServingCore`): the sessions served, the
    terminal slot, the restore stage, the clock, where events go, how a task is run alongside and how
    an inbox is listed again."""

    roster: Sessions
    arbiter: Arbiter
    reconcile: Reconcile
    clock: Clock
    emit: Callable[[ServeEvent], None]
    spawn: Spawn
    rescan: Callable[[ServedSession], Coroutine[object, object, None]]
    """List an inbox again now (a file found changed needs no file event, nor the safety rescan)."""
