"""The `pi-authorizer` entry point: headless commands call `core/`; no subcommand opens the app."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tui.commands import app, demo, explain, history, run, serve


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pi-authorizer",
        description="Serve pi subagents' forwarded permission asks from a side terminal.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND")
    for module in (app, serve, run, explain, history, demo):
        module.add_parser(subparsers)
    return parser


def with_default_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """Bare `pi-authorizer [--session ID ...]` means `pi-authorizer app [--session ID ...]`."""
    commands = {
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    }
    args = list(argv)
    position = 0
    while position < len(args) and args[position] in {"-v", "--verbose"}:
        position += 1
    if position < len(args) and (args[position] in commands or args[position] in {"-h", "--help"}):
        return args
    return [*args[:position], "app", *args[position:]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(with_default_command(parser, sys.argv[1:] if argv is None else argv))
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
