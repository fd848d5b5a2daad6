"""`pi-authorizer serve`: the serving core without a screen (fail-safe deny, or leave asks)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from core.disk.paths import env_line
from core.text import log_safe
from core.vocabulary.asks import Arbiter, DenyingArbiter, LeavingArbiter
from tui.commands.collector import settle_for_serving
from tui.commands.node import (
    check_usage,
    configure_logging,
    headless_node,
    install_stop_signals,
    take_sessions,
)
from tui.commands.options import (
    add_rules_options,
    add_serving_options,
    forwarding_root,
    session_ids,
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("serve", help="serve forwarded asks headless (no screen)")
    add_serving_options(parser)
    add_rules_options(parser)
    add_on_ask_option(parser)
    parser.set_defaults(handler=run)


def add_on_ask_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--on-ask",
        choices=("deny", "leave"),
        default="deny",
        help="what to do with an ask no rule decides: deny at once (fail-safe, default) or leave it "
        "in the inbox for another authorizer",
    )


def arbiter_for(on_ask: str) -> Arbiter:
    return DenyingArbiter() if on_ask == "deny" else LeavingArbiter()


def run(args: argparse.Namespace) -> int:
    check_usage(args)
    configure_logging(args.verbose)
    return asyncio.run(_serve(args))


async def _serve(args: argparse.Namespace) -> int:
    node = headless_node(args, arbiter_for(args.on_ask))
    core = node.core
    ids = session_ids(args)
    install_stop_signals(core)  # before the heartbeat exists, so a stop is never lost
    taken = take_sessions(node, ids, default=not args.sessions)
    if not taken:
        print("pi-authorizer: no session left to serve", file=sys.stderr)
        return 3
    if not args.sessions:
        print(
            f"pi-authorizer: serving its own session; run agents with:\n  "
            f"{env_line(taken[0], forwarding_root(args))}",
            file=sys.stderr,
        )
    settle_for_serving()
    try:
        await core.run()
    finally:
        node.close()  # what the history could not write yet: written, or spooled for the next start
    print(f"pi-authorizer: stopped serving {', '.join(log_safe(sid) for sid in taken)}", file=sys.stderr)
    return 0
