"""The `pi-authorizer` entry point: headless commands call `core/`; no subcommand opens the app."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from core.text import log_safe
from tui.commands import (
    app_command,
    demo_command,
    explain_command,
    history_command,
    run_command,
    serve_command,
)
from tui.commands.arguments import CliError


class Parser(argparse.ArgumentParser):
    """Usage errors as one sanitised line (`pi-authorizer: error: ...`); `-h` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {log_safe(message, 400)} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pi-authorizer",
        description="Serve pi subagents' forwarded permission asks from a side terminal.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    parser.add_argument("-V", "--version", action="version", version=f"pi-authorizer {version()}")
    subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND")
    for module in (app_command, serve_command, run_command, explain_command, history_command, demo_command):
        module.add_parser(subparsers)
    return parser


def version() -> str:
    """The installed distribution's version (a checkout run without installing says so)."""
    try:
        return metadata.version("pi-authorizer")
    except metadata.PackageNotFoundError:
        return "(not installed)"


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
    own_options = {"-h", "--help", "-V", "--version"}
    if position < len(args) and (args[position] in commands or args[position] in own_options):
        return args
    return [*args[:position], "app", *args[position:]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(with_default_command(parser, sys.argv[1:] if argv is None else argv))
    try:
        code: int = args.handler(args)
    except CliError as exc:
        print(f"pi-authorizer: {log_safe(str(exc), 400)}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
