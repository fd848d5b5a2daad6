"""Simulated pi children: they write a forwarded ask and read the verdict back exactly as a child
does. `tui.demo.scenario` builds the asks they send (`pi-authorizer demo`, screenshots, benchmarks).

A child here follows the reference's protocol (§1.2): `mkdir -p` its parent's inbox, write the
request atomically, poll for `responses/<id>.json`, read it once, delete both files, clean up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.clock import SYSTEM_CLOCK, Clock, wall_ms
from core.disk.paths import encode_session_id
from core.wire.response import ReadResponse, parse_response

CHILD_POLL_S = 0.25


@dataclass(frozen=True)
class ChildResult:
    """What one simulated child received (None: it gave up waiting)."""

    agent: str
    request_id: str
    summary: str
    response: ReadResponse | None


@dataclass(frozen=True)
class SimulatedChild:
    """One child session forwarding to `target` under `root`."""

    root: Path
    target: str
    agent: str
    session_id: str
    cwd: str
    clock: Clock = SYSTEM_CLOCK

    @property
    def folder(self) -> Path:
        return self.root / "sessions" / encode_session_id(self.target)

    def write(self, body: dict[str, Any]) -> Path:
        requests, responses = self.folder / "requests", self.folder / "responses"
        for path in (self.folder, requests, responses):
            path.mkdir(parents=True, exist_ok=True)
        target = requests / f"{body['id']}.json"
        temp = target.with_name(f"{target.name}.{os.getpid()}.{wall_ms(self.clock)}.tmp")
        temp.write_bytes(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())
        temp.rename(target)
        return target

    async def ask(
        self, body: dict[str, Any], timeout_s: float, poll_s: float = CHILD_POLL_S
    ) -> ReadResponse | None:
        """Send one ask and wait for the verdict like a child; withdraw it on timeout."""
        request = self.write(body)
        response = self.folder / "responses" / f"{body['id']}.json"
        deadline = self.clock.monotonic() + timeout_s
        try:
            while self.clock.monotonic() < deadline:
                if response.exists():
                    read = parse_response(response.read_bytes())
                    response.unlink(missing_ok=True)
                    return read
                await asyncio.sleep(poll_s)
            return None
        finally:
            request.unlink(missing_ok=True)
            self._cleanup_if_empty()

    def _cleanup_if_empty(self) -> None:
        for path in (self.folder / "requests", self.folder / "responses", self.folder):
            with contextlib.suppress(OSError):
                path.rmdir()
