"""Change notification for the forwarding root: inotify through `watchfiles`, polling as fallback.

The reference polls every 250 ms; a person at a side terminal should see an ask within
milliseconds. The watcher only says *which session folders changed*; the serving loop then rescans
those inboxes, so a missed or coalesced event can delay an ask by at most one safety rescan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import watchfiles

from core.inbox import ensure_dir

log = logging.getLogger("pi_authorizer.watch")

# watchfiles batches changes: it waits `step` ms for more before yielding, at most `debounce` ms.
_STEP_MS = 2
_DEBOUNCE_MS = 20
_POLL_DELAY_MS = 50


def _session_folder(sessions_dir: Path, changed: str) -> str | None:
    try:
        relative = Path(changed).relative_to(sessions_dir)
    except ValueError:
        return None
    return relative.parts[0] if relative.parts else None


async def watch_session_folders(
    forwarding_root: Path, stop: asyncio.Event, force_polling: bool = False
) -> AsyncIterator[set[str]]:
    """Yield the set of `sessions/<folder>` names touched since the last yield, until `stop`.

    An empty set means "something changed, rescan everything" (the watch was restarted).
    """
    sessions_dir = forwarding_root / "sessions"
    ensure_dir(sessions_dir)
    polling = force_polling
    while not stop.is_set():
        try:
            async for changes in watchfiles.awatch(
                sessions_dir,
                watch_filter=None,
                debounce=_DEBOUNCE_MS,
                step=_STEP_MS,
                stop_event=stop,
                force_polling=polling,
                poll_delay_ms=_POLL_DELAY_MS,
                ignore_permission_denied=True,
            ):
                folders = {f for _, path in changes if (f := _session_folder(sessions_dir, path))}
                yield folders
        except (OSError, RuntimeError) as exc:
            if polling:
                raise
            log.warning("inotify watch failed (%s); falling back to polling every %d ms", exc, _POLL_DELAY_MS)
            polling = True
        if not stop.is_set():
            # The watched folder vanished or the watch ended: recreate it and rescan everything.
            ensure_dir(sessions_dir)
            yield set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.05)
