"""`pi-authorizer run -- COMMAND...`: start an agent that forwards here, and serve it while it runs."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from core.disk.paths import forwarding_env
from core.text import log_safe
from tui.commands.node import (
    configure_logging,
    headless_node,
    install_stop_signals,
    take_sessions,
)
from tui.commands.options import (
    add_rules_options,
    add_serving_options,
    check_serving_dirs,
    forwarding_root,
    session_ids,
)
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
    check_serving_dirs(args)
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
    ids = session_ids(args)[:1]
    install_stop_signals(core)  # before the heartbeat exists, so a stop is never lost
    if not take_sessions(node, ids):
        return 3
    server = asyncio.create_task(core.run())
    env = child_environment(ids[0], forwarding_root(args))
    try:
        child = await asyncio.create_subprocess_exec(*command, env=env)
    except OSError as exc:
        print(f"pi-authorizer run: cannot start {log_safe(f'{command[0]!r}: {exc}', 400)}", file=sys.stderr)
        core.stop()
        await server
        return 127
    code = await child.wait()
    core.stop()
    await server
    return code
