"""The `pi-authorizer` entry point: headless commands call `core/`; no subcommand opens the app."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from core.text import log_safe
from tui.commands import (
    app_command,
    broker_command,
    demo_command,
    explain_command,
    history_command,
    judge_command,
    run_command,
    serve_command,
)
from tui.commands.arguments import CliError

#: Options people bring from elsewhere, and what they are now.
_MOVED = {
    "--keep-history": "history never deletes rows; to delete old ones: history prune --older-than DURATION",
    "--keep-history-rows": "history never deletes rows; to delete old ones: history prune --keep-rows N",
}


class Parser(argparse.ArgumentParser):
    """Usage errors as one sanitised line (`pi-authorizer: error: ...`), with "did you mean" for a
    mistyped option, subcommand or choice; `-h` still shows the usage."""

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}{_option_hint(self, parsed, extras)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {log_safe(message + _choice_hint(message), 400)} (see --help)\n")


def _choice_hint(message: str) -> str:
    """`invalid choice: 'hisory' (choose from ...)` → `; did you mean 'history'?`"""
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if found is None:
        return ""
    close = difflib.get_close_matches(found.group(1), re.findall(r"'([^']*)'", found.group(2)), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _option_hint(parser: argparse.ArgumentParser, parsed: argparse.Namespace, extras: list[str]) -> str:
    """For the first unknown option: what it became, or the closest option of the command given."""
    unknown = next((extra.split("=", 1)[0] for extra in extras if extra.startswith("-")), None)
    if unknown is None:
        return ""
    if unknown in _MOVED:
        return f" ({_MOVED[unknown]})"
    options = list(parser._option_string_actions)
    sub = _commands(parser).get(getattr(parsed, "command_name", None) or "")
    if sub is not None:
        options += list(sub._option_string_actions)
    close = difflib.get_close_matches(unknown, options, n=1)
    return f"; did you mean {close[0]}?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pi-authorizer",
        description="Serve pi subagents' forwarded permission asks from a side terminal.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    parser.add_argument("-V", "--version", action="version", version=f"pi-authorizer {version()}")
    subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND")
    for module in (app_command, serve_command, run_command, broker_command, explain_command, history_command,
                   demo_command, judge_command):
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


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def with_verbs(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    """`history [...] prune [...]` is the command `history-prune`; a bare word that names no command
    is a mistyped one (the app takes no words), said with the closest command."""
    commands = _commands(parser)
    position = 0
    while position < len(args) and args[position] in {"-v", "--verbose"}:
        position += 1
    if position == len(args) or args[position].startswith("-"):
        return args
    word = args[position]
    if word == "history" and args[position + 1:position + 2] == [judge_command.VERB]:
        return [*args[:position], judge_command.COMMAND, *args[position + 2:]]
    if word == "history" and history_command.VERB in args[position + 1:]:
        rest = args[position + 1:]
        rest.remove(history_command.VERB)
        return [*args[:position], history_command.PRUNE, *rest]
    if word not in commands:
        listed = [name for name in commands if name not in (history_command.PRUNE, judge_command.COMMAND)]
        close = difflib.get_close_matches(word, listed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; one of: {', '.join(listed)}"
        parser.error(f"unknown command {word!r}{hint}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    given = with_verbs(parser, list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(with_default_command(parser, given))
    try:
        code: int = args.handler(args)
    except CliError as exc:
        print(f"pi-authorizer: {log_safe(str(exc), 400)}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
