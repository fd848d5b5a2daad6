"""Fixtures for the app tests: real request files on a tmp forwarding root, real responses on disk."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.notifications import Notification
from textual.pilot import Pilot
from textual.strip import Strip

from core.clock import SYSTEM_CLOCK, Clock
from core.disk.paths import encode_session_id
from core.forwarding.liveness import heartbeat_path
from core.history import HistoryStore
from core.judging.recorded import RecordedAuthority
from core.person import AskDecided, Person
from core.seams import FaultHook, Seams, no_fault
from core.serving import ServingCore
from core.vocabulary.asks import Ask, AskKey, Judgment
from core.wire.reader import parse_request
from core.wiring import AttendedNode, NodeOptions, build_attended_node
from tui.app import AppSeams, AuthorizerApp
from tui.ui_settings import UiSettings

SERVED = "019ff969-c34c-70be-9034-fae19c852932"
#: A second served session (the session column, adopting an inbox).
OTHER = "019ff96b-2222-7000-8000-bbbbbbbbbbbb"
#: A session nobody serves (its inbox is listed as unserved).
ORPHAN = "orphan-session-1"
CHILD = "019ff96a-1111-7000-8000-aaaaaaaaaaaa"
FIXED_NOW = 1_790_000_060.0  # 60 s after FIXED_CREATED
FIXED_CREATED = 1_790_000_000_000


def request_body(
    request_id: str,
    *,
    value: str = "git push origin main",
    agent: str = "Explore",
    created_at: float | None = None,
    facts: bool = True,
    suggestion: bool = True,
    target: str = SERVED,
    surface: str = "bash",
    message: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A request as a newest child writes it (`facts=False`: as 20.7.3 writes it)."""
    created = created_at if created_at is not None else time.time() * 1000
    body: dict[str, Any] = {
        "id": request_id,
        "createdAt": created,
        "requesterSessionId": CHILD,
        "targetSessionId": target,
        "requesterAgentName": agent,
        "message": message if message is not None else (
            f"Agent '{agent}' requested {surface} command '{value}' (matched 'git *'). Allow this command?"),
        "source": "tool_call",
        "surface": surface,
        "value": value,
    }
    if suggestion:
        if facts:
            body["sessionApproval"] = {"grants": [{"surface": surface, "pattern": "git push *"}]}
        else:
            body["sessionApproval"] = {"surface": surface, "patterns": ["git push *"]}
    if facts:
        body["accessIntent"] = {
            "surface": surface,
            "matchValues": [value],
            "boundaryValue": None,
            "requesterCwd": "/worktree/issue-42",
            "principal": {"sessionId": CHILD, "agentName": agent},
            "askingUnits": [{"command": value}],
        }
    body.update(extra or {})
    return body


def broker_ask(host: str, session: str, body: dict[str, Any], *, arrived_at: float,
               timeout_ms: int = 600_000, node: str | None = None) -> Ask:
    """An ask as `core/courier/broker_inbox.py` builds one from a courier's parcel: the child's request
    with the courier's hop spliced in, keyed `nats:<host>/<session>` by the parcel id."""
    hop = {"host": host, "sessionId": session, "node": node or f"courier-{host}"}
    parsed = parse_request(json.dumps(body | {"hops": [hop]}).encode())
    return Ask(key=AskKey(f"nats:{host}/{session}", f"courier-{body['id']}"), parsed=parsed,
               judgment=Judgment("ask", explanation=("No rule of this node decided.",)),
               arrived_at=arrived_at, timeout_ms=timeout_ms,
               responder_session_id=str(body["targetSessionId"]))


def requests_dir(root: Path, session_id: str = SERVED) -> Path:
    return root / "sessions" / encode_session_id(session_id) / "requests"


def responses_dir(root: Path, session_id: str = SERVED) -> Path:
    return root / "sessions" / encode_session_id(session_id) / "responses"


def write_request(root: Path, body: dict[str, Any], session_id: str = SERVED) -> Path:
    """Atomically, as a child does: a `.tmp` file renamed into `requests/`."""
    folder = requests_dir(root, session_id)
    folder.mkdir(parents=True, exist_ok=True)
    responses_dir(root, session_id).mkdir(parents=True, exist_ok=True)
    target = folder / f"{body['id']}.json"
    temp = folder / f".{body['id']}.{os.getpid()}.tmp"
    temp.write_text(json.dumps(body, separators=(",", ":"), ensure_ascii=False), encoding="utf-8")
    os.replace(temp, target)
    return target


def read_response(root: Path, request_id: str, session_id: str = SERVED) -> dict[str, Any] | None:
    path = responses_dir(root, session_id) / f"{request_id}.json"
    try:
        value: dict[str, Any] = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    return value


class FakeKeyClock:
    """The key-safety clock in tests: time moves only when the test says so.

    A key's time is the fake time in effect when Textual stamped (created) the key event, however
    late the app handles it, exactly as production uses the stamp.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start
        self._changes: list[tuple[float, float]] = [(float("-inf"), start)]

    def monotonic(self) -> float:
        return self.t

    def key_time(self, stamped: float) -> float:
        return next(fake for real, fake in reversed(self._changes) if real <= stamped)

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self._changes.append((time.monotonic(), self.t))


@dataclass
class Rig:
    root: Path
    state: Path
    #: The node as `pi-authorizer app` builds it (`core.wiring.build_attended_node`).
    node: AttendedNode
    app: AuthorizerApp
    keys: FakeKeyClock = field(default_factory=FakeKeyClock)
    #: Every decision the person's slot published, in order (recorded from its events).
    decided: list[AskDecided] = field(default_factory=list)
    #: Every bell / OSC signal the app wrote to its terminal (`AppSeams.terminal`).
    signals: list[str] = field(default_factory=list)
    #: Every toast the app showed (`AppSeams.toasts`).
    toasts: list[Notification] = field(default_factory=list)

    @property
    def core(self) -> ServingCore:
        return self.node.core

    @property
    def person(self) -> Person:
        return self.node.person

    @property
    def authority(self) -> RecordedAuthority:
        assert self.node.authority is not None
        return self.node.authority

    @property
    def heartbeat(self) -> Path:
        return heartbeat_path(self.root, SERVED)


def attended_node(
    tmp: Path,
    history: HistoryStore | None = None,
    sessions: Sequence[str] = (SERVED,),
    *,
    permission: dict[str, Any] | None = None,
    fault: FaultHook = no_fault,
    clock: Clock = SYSTEM_CLOCK,
) -> AttendedNode:
    """A node built as `pi-authorizer app` builds it (`core.wiring.build_attended_node`) in `tmp`: its
    forwarding root `tmp/forwarding`, state dir `tmp/state`, agent dir and project; `sessions` taken
    as the start takes them (`take_session`: `history`, if any, reconciled).

    `permission`: this node's rules (the agent dir's pi-permission-system config; none: every ask with
    facts goes to the person); `fault`: the publisher's stage hook (`Seams.fault`), to hold a
    decision's write at a stage; `clock`: the node's (`Seams.clock`)."""
    root, agent = tmp / "forwarding", tmp / "agent"
    root.mkdir(parents=True, exist_ok=True)
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"permission": permission or {}}), encoding="utf-8")
    options = NodeOptions(root, tmp / "state", agent, tmp / "project", seams=Seams(fault=fault, clock=clock))
    node = build_attended_node(options, history)
    for sid in sessions:
        node.take_session(sid)
    return node


def make_rig(
    tmp: Path,
    settings: UiSettings | None = None,
    *,
    permission: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.time,
    sessions: Sequence[str] = (SERVED,),
    keys: FakeKeyClock | None = None,
    fault: FaultHook = no_fault,
    core_clock: Clock = SYSTEM_CLOCK,
) -> Rig:
    """The app over `attended_node(tmp, ...)`, no history, serving `sessions`.

    `clock`: the app's wall clock; `keys`: the key-safety clock, fake, so no test depends on how fast
    the machine is; `core_clock`: the node's clock (a `ManualClock` moves a child's deadline)."""
    node = attended_node(tmp, None, sessions, permission=permission, fault=fault, clock=core_clock)
    root, state = node.core.root, tmp / "state"
    keys = keys or FakeKeyClock()
    signals: list[str] = []
    toasts: list[Notification] = []
    app = AuthorizerApp(node, settings or UiSettings(input_grace_ms=0),
                        AppSeams(wall=clock, keys=keys, terminal=signals.append, toasts=toasts.append))
    rig = Rig(root, state, node, app, keys, signals=signals, toasts=toasts)
    node.person.subscribe(lambda event: rig.decided.append(event) if isinstance(event, AskDecided) else None)
    return rig


async def wait_for(pilot: Pilot[Any], predicate: Callable[[], bool], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


async def wait_rows(pilot: Pilot[Any], app: AuthorizerApp, count: int, within: float = 30.0) -> None:
    """`count` rows, and (on the queue) the selected ask painted: its keys count after the grace."""

    def ready() -> bool:
        if not (app.queue.ready and app.queue.table.row_count == count):
            return False
        return count == 0 or app.screen is not app.queue or app.safety.ready_at() is not None

    await wait_for(pilot, ready, within)


async def wait_painted(pilot: Pilot[Any], app: AuthorizerApp, within: float = 30.0) -> None:
    """What is in front (a modal, else the selected ask) has been painted."""
    await wait_for(pilot, lambda: app.safety.ready_at() is not None, within)


async def wait_response(
    pilot: Pilot[Any], root: Path, request_id: str, within: float = 30.0, session_id: str = SERVED
) -> dict[str, Any]:
    found: dict[str, Any] | None = None

    def ready() -> bool:
        nonlocal found
        found = read_response(root, request_id, session_id)
        return found is not None

    await wait_for(pilot, ready, within)
    assert found is not None
    return found


def names(app: AuthorizerApp) -> list[str]:
    """The request ids of the queue's rows, in order."""
    return [k.name.removesuffix(".json") for k in app.queue.table.ask_keys]


def selected(app: AuthorizerApp) -> str:
    """The request id of the selected ask."""
    assert app.queue.selected is not None
    return app.queue.selected.name.removesuffix(".json")


def rendered_strips(app: AuthorizerApp) -> list[Strip]:
    """Every strip the compositor would send to the terminal for the current screen."""
    screen = app.screen
    compositor = screen._compositor
    return list(compositor.render_strips())


def rendered_text(app: AuthorizerApp) -> str:
    return "\n".join("".join(seg.text for seg in strip) for strip in rendered_strips(app))


async def settle(pilot: Pilot[Any]) -> None:
    """Let the app handle what is queued and repaint: no wall-clock wait (a condition uses `wait_for`)."""
    await pilot.pause()
    await asyncio.sleep(0)
    await pilot.pause()
