"""A real serving core on tmp dirs with the history as its ledger and observer."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.history import HistoryRow, HistoryStore, spool
from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.seams import FaultHook, Seams, no_fault
from core.serving import Chain, ServingCore
from core.vocabulary.asks import Arbiter, AskKey
from core.vocabulary.events import ServeEvent
from core.wire.reader import parse_request
from core.wire.response import deny, encode_response

REPO = Path(__file__).resolve().parents[2]
S = "019ff969-c34c-70be-9034-fae19c852932"


def intent(surface: str, *values: str, agent: str = "Explore") -> dict[str, Any]:
    return {
        "surface": surface,
        "matchValues": list(values),
        "boundaryValue": None,
        "requesterCwd": "/worktree",
        "principal": {"sessionId": "child", "agentName": agent},
    }


#: Why a spooled fail-safe close was denied (`spooled_close`).
HISTORY_REFUSED = "the history could not record the verdict"
SPOOL_DENIAL = deny(responder="s", at_ms=1, decided_by=None, reason=HISTORY_REFUSED)


def b64(data: bytes) -> str:
    """Bytes as a spool line holds them."""
    return base64.b64encode(data).decode()


def wire_request(rid: str) -> bytes:
    """The bytes of a plain ask of session `S` (`ls`), as a child writes them."""
    return json.dumps({"id": rid, "createdAt": 1, "requesterSessionId": "child", "targetSessionId": S,
                       "requesterAgentName": "Explore", "message": "m", "surface": "bash",
                       "value": "ls"}).encode()


#: A fail-safe denial as a hand-made spool line holds it.
SPOOLED_DENIAL = b64(encode_response(deny(responder=S, at_ms=1, decided_by=None, reason="history failed")))


def spool_with(line: dict[str, object]) -> bytes:
    """A packed spool of `line` and, after it, a well-formed close of `good.json` (the one a test
    expects written whatever `line` does)."""
    good = {"kind": "answered", "session": S, "name": "good.json", "at": 2.0,
            "request": b64(wire_request("good")), "response": SPOOLED_DENIAL, "outcome": "fail-safe",
            "reason": "failed"}
    return spool.packed([json.dumps(line).encode() + b"\n", json.dumps(good).encode() + b"\n"])


def spooled_close(i: int, message: str = "make", at: float | None = None) -> ServeEvent:
    """The fail-safe close of ask `r<i>` of session `s` (its message `message`), as a stop on a full
    disk spools it; observed at `at` (default `10 + i`; a history's retention keeps only a recent one)."""
    raw = json.dumps({"id": f"r{i}", "createdAt": 1, "requesterSessionId": "child", "targetSessionId": "s",
                      "requesterAgentName": "Explore", "message": message, "surface": "bash",
                      "value": f"make {i}"}).encode()
    when = 10.0 + i if at is None else at
    return ServeEvent("answered", AskKey("s", f"r{i}.json"), when, parse_request(raw), SPOOL_DENIAL,
                      "fail-safe", HISTORY_REFUSED, raw=raw)


def observe_refused(store: HistoryStore, events: Iterable[ServeEvent]) -> None:
    """`store.observe` each, with no loop running (written at once): a full disk refuses them, and the
    history keeps them queued."""
    for event in events:
        with contextlib.suppress(Exception):
            store.observe(event)


def suggestion(surface: str, pattern: str) -> dict[str, Any]:
    return {"grants": [{"surface": surface, "pattern": pattern}]}


class Node:
    """One serving node: config in a tmp agent dir, history in a tmp state dir."""

    def __init__(self, tmp_path: Path, permission: dict[str, Any] | None = None) -> None:
        self.root = tmp_path / "root"
        self.state = tmp_path / "state"
        self.agent_dir = tmp_path / "agent"
        config = self.agent_dir / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"permission": permission or {}}))
        self.rules = PolicyStore(self.agent_dir, None, None, home="/home/me")
        self.authority = RecordedAuthority(self.rules)
        self.history = HistoryStore.in_state_dir(self.state)
        self.events: list[ServeEvent] = []
        self.fault: FaultHook = no_fault

    async def start(self, arbiter: Arbiter, chain: Chain | None = None) -> ServingCore:
        core = ServingCore(
            self.root, self.state, arbiter, judge=self.authority, chain=chain, ledger=self.history,
            seams=Seams(fault=self.fault),
        )
        core.subscribe(self.history.observe)
        core.subscribe(self.events.append)
        core.add_session(S)
        self.core = core
        self.task = asyncio.create_task(core.run())
        await asyncio.sleep(0)  # let it start; its first scan serves whatever is already there
        return core

    async def stop(self) -> None:
        self.core.stop()
        await asyncio.wait_for(self.task, 5)

    def only_row(self) -> HistoryRow:
        rows = self.history.query()
        assert len(rows) == 1, rows
        return rows[0]


ALLOW_LS = {"bash": {"*": "ask", "ls *": "allow"}}



def serve(tmp_path: Path) -> subprocess.Popen[bytes]:
    """The production `serve --on-ask deny`, on the same root, state dir and (empty) rules."""
    (tmp_path / "agent").mkdir(exist_ok=True)
    command = [
        sys.executable, "-m", "tui.cli", "serve", "--session", S,
        "--forwarding-root", str(tmp_path / "root"), "--create", "--state-dir", str(tmp_path / "state"),
        "--on-ask", "deny", "--agent-dir", str(tmp_path / "agent"), "--project", str(tmp_path),
    ]  # fmt: skip
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)



def run_until_killed(
    tmp_path: Path, stage: str, staging: str = "anonymous"
) -> subprocess.CompletedProcess[bytes]:
    """A real serving process on `tmp_path`'s dirs, killed by its own fault seam at `stage`; `staging`
    "named" stages responses as named temps (a filesystem without anonymous files)."""
    (tmp_path / "agent").mkdir(exist_ok=True)
    folders = (tmp_path / "root", tmp_path / "state", tmp_path / "agent")
    command = [sys.executable, "-m", "tests.history.crash_child", *map(str, folders), stage, "1", staging]
    return subprocess.run(command, cwd=REPO, capture_output=True, timeout=120, check=False)
