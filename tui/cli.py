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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None) or app.run
    code: int = handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
