"""Bare `pi-authorizer` (or `pi-authorizer app`): the interactive app.

Builds the same serving core `serve` builds (this node's recorded authority, chain links, config
watching), with a `Person` as its arbiter and the recorded authority as the book of
whole-serving-session grants, takes the sessions named with `--session` (or this authorizer's own
id), and runs `AuthorizerApp`. The person-facing knobs (`doublePressToConfirm`,
`forwardingTimeoutMs`, `promptNotifications`, `permissionDialogKeys`) come from the pi config; the
person's own (keys, double press, notifications, yolo, the child's timeout) never from the project
layer children can write.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from core.disk.paths import env_line
from core.disk.tree import FILE_MODE, Anchor
from core.judging.recorded import RecordedAuthority
from tui.commands.arguments import non_negative_int
from tui.commands.collector import settle_for_serving
from tui.commands.node import attended_node, check_usage, configure_logging, take_sessions
from tui.commands.options import (
    add_rules_options,
    add_serving_options,
    forwarding_root,
    session_ids,
    state_dir,
)
from tui.ui_settings import UiSettings

log = logging.getLogger("pi_authorizer.app")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("app", help="open the interactive authorizer (the default)")
    add_app_options(parser)
    parser.set_defaults(handler=run)


def add_app_options(parser: argparse.ArgumentParser) -> None:
    add_serving_options(parser)
    add_rules_options(parser)
    parser.add_argument(
        "--no-double-press",
        action="store_true",
        help="commit y / s / n on the first press (an ask with hidden characters still needs two)",
    )
    parser.add_argument(
        "--grace-ms", type=non_negative_int, default=None, metavar="MS",
        help="decision keys are inert this long after the visible ask changes (default 500)",
    )


def with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Bare `pi-authorizer` parses no serving options: fill in what `app` would have defaulted."""
    parser = argparse.ArgumentParser(add_help=False)
    add_app_options(parser)
    filled = parser.parse_args([])
    for name, value in vars(args).items():
        setattr(filled, name, value)
    return filled


def ui_settings(args: argparse.Namespace, authority: RecordedAuthority | None) -> UiSettings:
    """The pi config's knobs (config files only, never agent files; none without an authority), then
    command-line overrides."""
    base = UiSettings()
    try:
        if authority is not None:
            knobs = authority.store.policy("").settings
            paths = authority.store.sources.config_paths()
            base = UiSettings(
                double_press=knobs.double_press_to_confirm,
                prompt_notifications=tuple(knobs.prompt_notifications),
                dialog_keys=dict(knobs.permission_dialog_keys),
                dialog_keys_from=str(paths.get(knobs.dialog_keys_origin or "", "")),
                ignored_knobs=knobs.ignored_knobs,
            )
            # The ignored ones are logged by `RecordedAuthority.report_config`, shown by the app.
    except Exception as exc:  # an unreadable config must not keep the person from the asks
        log.error("pi config knobs not read (%s); using the defaults", exc)
    return UiSettings(
        double_press=False if args.no_double_press else base.double_press,
        prompt_notifications=base.prompt_notifications,
        input_grace_ms=max(0, args.grace_ms) if args.grace_ms is not None else base.input_grace_ms,
        dialog_keys=base.dialog_keys,
        dialog_keys_from=base.dialog_keys_from,
        ignored_knobs=base.ignored_knobs,
    )


def log_to_file(state: Path, verbose: bool) -> Path:
    """Textual draws on stderr, so log lines go to `<state>/app.log` while the app runs."""
    path = state / "app.log"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    with Anchor(state, "state dir").folder(create=True) as fd:
        log_fd = os.open(path.name, flags, FILE_MODE, dir_fd=fd)  # a link in its place is refused
    configure_logging(verbose, os.fdopen(log_fd, "a", encoding="utf-8"))
    return path


def run(args: argparse.Namespace) -> int:
    from tui.app import AuthorizerApp

    args = with_defaults(args)
    check_usage(args)
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        print("pi-authorizer: the app needs a terminal; use `pi-authorizer serve` headless.", file=sys.stderr)
        return 2
    log_file = log_to_file(state_dir(args), getattr(args, "verbose", False))
    node = attended_node(args)
    settings = ui_settings(args, node.authority)
    taken = take_sessions(node, session_ids(args), default=not args.sessions)
    if not taken:
        print("pi-authorizer: no session left to serve", file=sys.stderr)
        return 3
    app = AuthorizerApp(node, settings)
    settle_for_serving()
    try:
        code = app.run()
    finally:
        # Belt and braces: `Quitting.stop_serving` already did this on a normal quit.
        node.core.served.release()
        node.close()  # what the history could not write yet: written, or spooled for the next start
    configure_logging(getattr(args, "verbose", False))
    if not args.sessions:
        line = env_line(taken[0], forwarding_root(args))
        print(f"pi-authorizer: served {taken[0]}; agents forward here with:\n  {line}", file=sys.stderr)
    print(f"pi-authorizer: log in {log_file}", file=sys.stderr)
    app.quitting.exit_process_if_signalled()
    return code if isinstance(code, int) else 0
