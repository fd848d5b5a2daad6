"""`pi-authorizer run -- COMMAND...`: start an agent that forwards to this root's session.

Beside an open app (or any server of that session) the command forwards to it and the person decides
there; alone, `run` serves the session headless while the command runs, and says so at start.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from core.disk.paths import forwarding_env
from core.disk.tree import UnsafeFolder
from core.forwarding.liveness import SessionHeld
from core.text import log_safe
from core.wiring import HistoryFailed
from tui.commands.node import check_usage, configure_logging, headless_node, install_stop_signals
from tui.commands.options import (
    add_rules_options,
    add_serving_options,
    forwarding_root,
    session_ids,
)
from tui.commands.own_session import holder_command
from tui.commands.serve_command import add_on_ask_option, arbiter_for


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run", help="run COMMAND with the forwarding environment and serve its asks while it runs"
    )
    add_serving_options(parser)
    add_rules_options(parser)
    add_on_ask_option(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    command: list[str] = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print(
            "pi-authorizer run: give the command after --, e.g. run -- pi -p 'fix the tests'", file=sys.stderr
        )
        return 2
    check_usage(args)
    configure_logging(args.verbose)
    return asyncio.run(_run(args, command))


def child_environment(session_id: str, root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PI_AGENT_ROUTER_PARENT_SESSION_ID", None)  # it would win over ours
    env.update(forwarding_env(session_id, root))  # a child finds the root through its agent dir
    return env


async def _run(args: argparse.Namespace, command: list[str]) -> int:
    node = headless_node(args, arbiter_for(args.on_ask))
    core = node.core
    sid = session_ids(args)[0]
    install_stop_signals(core)  # before the heartbeat exists, so a stop is never lost
    foreign: str | None = None
    try:
        foreign = node.take_session(sid).foreign
    except SessionHeld as exc:
        # An app (or another server) serves it: the command forwards there, and the person decides.
        say(beside_message(sid, exc.holder, command))
        return await _child(command, child_environment(sid, forwarding_root(args)))
    except UnsafeFolder as exc:
        say(f"not serving {sid!r}: {log_safe(str(exc), 400)}")
        return 3
    except HistoryFailed as exc:  # served all the same
        say(f"error: serving {sid!r}, but the history failed to close the asks withdrawn while no one "
            f"served it: {log_safe(str(exc), 400)}")
    if foreign is not None:
        # Another server (a newer pi) beats for it: it answers; this run stands by until it stops.
        say(f"{log_safe(foreign, 400)}: {log_safe(command[0], 200)} forwards its asks there; should that "
            f"server stop first, this run serves them headless: every ask no rule decides is {fate(args)}")
    else:
        say(alone_message(sid, args, command))
    server = asyncio.create_task(core.run())
    try:
        return await _child(command, child_environment(sid, forwarding_root(args)))
    finally:
        core.stop()
        try:
            await server
        finally:
            node.close()  # what the history could not write yet: written, or spooled for the next start


async def _child(command: list[str], env: dict[str, str]) -> int:
    """Start `command` and wait for it: its exit code, or 127 (said) when it cannot start."""
    try:
        child = await asyncio.create_subprocess_exec(*command, env=env)
    except OSError as exc:
        say(f"cannot start {log_safe(f'{command[0]!r}: {exc}', 400)}")
        return 127
    return await child.wait()


def say(line: str) -> None:
    print(f"pi-authorizer run: {line}", file=sys.stderr, flush=True)


def beside_message(sid: str, holder: str, command: list[str]) -> str:
    """What `run` does when the session is served already: who serves it decides the command's asks."""
    who = holder_command(holder)
    server = f"{log_safe(holder)} ({who})" if who else log_safe(holder)
    return (f"{server} serves {sid!r}: {log_safe(command[0], 200)} forwards its asks there, to be decided "
            "there; this run serves nothing itself (if that server stops, the asks wait in the inbox for "
            "the next authorizer)")


def alone_message(sid: str, args: argparse.Namespace, command: list[str]) -> str:
    """What `run` does alone: it serves headless, and what becomes of an ask no rule decides."""
    return (f"no app serves {sid!r}, so this run serves it headless while {log_safe(command[0], 200)} "
            f"runs: every ask this node's rules do not decide is {fate(args)}. To decide them yourself, "
            "open the app first (pi-authorizer) and run again: the command then forwards to it")


def fate(args: argparse.Namespace) -> str:
    """What headless serving does with an ask no rule decides (`--forward-to`, `--on-ask`)."""
    target: str | None = getattr(args, "forward_to", None)
    last = "denied at once (--on-ask deny)" if args.on_ask == "deny" else \
        "left in the inbox for another authorizer (--on-ask leave)"
    if target is not None:
        return f"carried to {log_safe(target, 200)}; what it cannot decide is {last}"
    return last
