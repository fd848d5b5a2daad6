"""The demo's asks: realistic forwarded requests of both wire generations (including hostile text, an
edit with its diff, and one command asked often enough that approving it suggests a rule), sent by
simulated children (`tui.demo.children`) in several worktrees. Used by `pi-authorizer demo`, the
screenshots and the benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.clock import wall_ms
from core.rules.settings import DEFAULT_FORWARDING_TIMEOUT_MS
from tui.demo.children import ChildResult, SimulatedChild

_ids = itertools.count(1)
#: The approvals of one pattern after which the history suggests a rule (`core.history.suggest`).
SUGGESTION_AFTER = 5


def _base(child: SimulatedChild, request_id: str) -> dict[str, Any]:
    return {
        "id": request_id,
        "createdAt": wall_ms(child.clock),
        "requesterSessionId": child.session_id,
        "targetSessionId": child.target,
        "requesterAgentName": child.agent,
    }


def _intent(
    child: SimulatedChild, surface: str, values: list[str], boundary: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "surface": surface,
        "matchValues": values,
        "boundaryValue": boundary,
        "requesterCwd": child.cwd,
        "principal": {"sessionId": child.session_id, "agentName": child.agent},
        **extra,
    }


def _payload(kind: str, surface: str, value: str, agent: str, pattern: str | None) -> dict[str, Any]:
    return {
        "kind": kind,
        "request": {
            "requester": {"agentName": agent, "forwarded": False, "sessionId": None},
            "surface": surface,
            "toolName": surface,
            "invokedToolName": None,
            "value": value,
            "matchedPattern": pattern,
            "commandContext": None,
            "executedUnit": None,
        },
        "evidence": [{"label": surface, "text": value, "detail": None}],
        "annotations": [],
    }


def newest(
    child: SimulatedChild,
    display_surface: str,
    value: str,
    intent: dict[str, Any],
    grants: list[tuple[str, str]],
    kind: str,
) -> dict[str, Any]:
    """A newest-generation request: `payload`, `accessIntent`, `sessionApproval.grants`, plus `message`."""
    rid = f"toolu_demo{next(_ids):04d}"
    body = _base(child, rid)
    body.update(
        {
            "message": f"Agent '{child.agent}' requested {display_surface} '{value}'. Allow?",
            "payload": _payload(kind, display_surface, value, child.agent, None),
            "source": "tool_call",
            "surface": display_surface,
            "value": value,
            "accessIntent": intent,
        }
    )
    if grants:
        body["sessionApproval"] = {"grants": [{"surface": s, "pattern": p} for s, p in grants]}
    return body


def legacy(child: SimulatedChild, surface: str, value: str, patterns: list[str]) -> dict[str, Any]:
    """A 20.7.3 request: display fields and a `{surface, patterns}` suggestion, no facts."""
    rid = f"{wall_ms(child.clock)}-demo{next(_ids):04d}-{os.getpid()}"
    body = _base(child, rid)
    body.update(
        {
            "message": f"Agent '{child.agent}' requested bash command '{value}'. Allow this command?",
            "source": "tool_call",
            "surface": surface,
            "value": value,
            "sessionApproval": {"surface": surface, "patterns": patterns},
        }
    )
    return body


def _single_value(child: SimulatedChild, surface: str, value: str, grant: str) -> dict[str, Any]:
    """A newest-generation ask whose surface is also its payload kind, with one match value."""
    return newest(child, surface, value, _intent(child, surface, [value]), [(surface, grant)], surface)


Scenario = Callable[[SimulatedChild], tuple[str, dict[str, Any]]]


def demo_scenarios() -> list[tuple[str, Scenario]]:
    """(agent, builder) pairs: realistic asks of both generations, including hostile text; a 20.7.3
    child's first (the generation npm serves today: every one of its asks comes to the person)."""

    def bash_chain(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        cmd = "cd /repo && npm install left-pad && git push origin main"
        intent = _intent(
            c,
            "bash",
            [cmd],
            askingUnits=[{"command": "npm install left-pad"}, {"command": "git push origin main"}],
        )
        return "bash chain with two asking units", newest(
            c, "bash", cmd, intent, [("bash", "npm install *")], "bash"
        )

    def git_status(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        cmd = "git status --short"
        return "git status (a rule allows it)", newest(
            c, "bash", cmd, _intent(c, "bash", [cmd]), [("bash", "git status *")], "bash"
        )

    def path_read(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        abs_path = f"{c.cwd}/src/auth/session.ts"
        intent = _intent(c, "path_read", [abs_path, "src/auth/session.ts"], abs_path)
        return "read from another worktree", newest(
            c, "read", "src/auth/session.ts", intent, [("path_read", f"{c.cwd}/src/auth/*")], "path"
        )

    def path_write(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        abs_path = f"{c.cwd}/.env.local"
        intent = _intent(c, "path_write", [abs_path, ".env.local"], abs_path)
        return "write .env.local (a rule denies it)", newest(c, "write", ".env.local", intent, [], "path")

    def external(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        target = "/home/me/.cargo/registry/src/index.crates.io/serde-1.0.219/src/lib.rs"
        intent = _intent(c, "external_directory_read", [target], target)
        return "external directory read", newest(
            c,
            "read",
            target,
            intent,
            [("external_directory_read", "/home/me/.cargo/registry/src/index.crates.io/serde-1.0.219/src/*")],
            "external_directory",
        )

    def mcp(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        return "MCP tool call", _single_value(c, "mcp", "github:create_issue", "github:*")

    def skill(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        return "skill", _single_value(c, "skill", "release-notes", "release-notes")

    def old_child(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        return ("make deploy, as a pi 20.7.3 child (no facts: only you decide it)",
                legacy(c, "bash", "make deploy", ["make deploy *"]))

    def edit(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        abs_path = f"{c.cwd}/src/auth/session.ts"
        intent = _intent(c, "path_write", [abs_path, "src/auth/session.ts"], abs_path)
        grants = [("path_write", f"{c.cwd}/src/auth/*")]
        body = newest(c, "edit", "src/auth/session.ts", intent, grants, "path")
        body["payload"]["evidence"] = [
            {"label": "oldText", "text": "const TTL_MS = 60_000;\nexport function expire(s: Session) {\n",
             "detail": None},
            {"label": "newText", "text": "const TTL_MS = 15 * 60_000;  // 15 minutes\n"
             "export function expire(s: Session) {\n", "detail": None},
        ]
        return "edit with a diff", body

    def npm_test(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        cmd = "npm test -- --runInBand"
        return "npm test (approve it 5 times: h suggests a rule)", newest(
            c, "bash", cmd, _intent(c, "bash", [cmd]), [("bash", "npm test *")], "bash"
        )

    def hostile(c: SimulatedChild) -> tuple[str, dict[str, Any]]:
        cmd = "ls [@click=app.quit]safe[/] \x1b]0;PWNED\x07 \u202eexe.txt\u200b"
        return "hidden characters and markup", newest(c, "bash", cmd, _intent(c, "bash", [cmd]), [], "bash")

    return [
        # First: pi 20.7.3 is the version npm serves today, and every ask of its children comes to you.
        ("Legacy", old_child),
        ("Explore", path_read),
        ("Builder", bash_chain),
        ("Explore", git_status),
        ("Builder", path_write),
        ("Researcher", external),
        ("Researcher", mcp),
        ("Writer", skill),
        ("Mallory\u202e", hostile),
        ("Builder", edit),
        *[("Tester", npm_test)] * SUGGESTION_AFTER,
    ]


DEMO_CONFIG: dict[str, Any] = {
    "permission": {
        "bash": {"git status *": "allow", "rm -rf *": "deny"},
        "path_write": {"*.env*": {"action": "deny", "reason": "secrets stay out of agent hands"}},
    },
    "forwardingTimeoutMs": DEFAULT_FORWARDING_TIMEOUT_MS,
}


async def run_children(
    root: Path,
    target: str,
    on_result: Callable[[ChildResult], None],
    stop: asyncio.Event,
    timeout_s: float = 600.0,
    pause_s: float = 1.5,
    rounds: int | None = None,
) -> None:
    """Children in several worktrees send the demo asks, round after round, until `stop` (or `rounds`
    rounds), then wait for their answers."""
    children = {
        agent: SimulatedChild(
            root,
            target,
            agent,
            f"child-{i}-{agent.encode('ascii', 'replace').decode()}",
            f"/worktrees/issue-{40 + i}",
        )
        for i, agent in enumerate(dict.fromkeys(a for a, _ in demo_scenarios()))
    }
    pending: set[asyncio.Task[None]] = set()

    async def one(child: SimulatedChild, scenario: Scenario) -> None:
        summary, body = scenario(child)
        response = await child.ask(body, timeout_s)
        on_result(ChildResult(child.agent, str(body["id"]), summary, response))

    done_rounds = 0
    try:
        while not stop.is_set() and (rounds is None or done_rounds < rounds):
            for agent, scenario in demo_scenarios():
                if stop.is_set():
                    break
                task = asyncio.create_task(one(children[agent], scenario))
                pending.add(task)
                task.add_done_callback(pending.discard)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause_s)
            done_rounds += 1
        if pending:
            await asyncio.wait(pending)
    finally:
        for task in pending:
            task.cancel()
