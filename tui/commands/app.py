"""Bare `pi-authorizer`: the interactive app, serving the same sessions `serve` would.

Builds the serving core with a `HumanAuthorizer` as its terminal slot, takes the sessions named
with `--session` (or this authorizer's own id), and runs `AuthorizerApp`. The person-facing knobs
(`doublePressToConfirm`, `forwardingTimeoutMs`, `promptNotifications`, `permissionDialogKeys`) come
from the pi config when it can be read; otherwise the reference defaults apply.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from core.human import HumanAuthorizer
from core.paths import agent_dir
from core.serving import ServingCore
from tui.commands.common import (
    add_serving_options,
    configure_logging,
    env_line,
    forwarding_root,
    session_ids,
    state_dir,
    take_sessions,
)
from tui.settings import UiSettings

log = logging.getLogger("pi_authorizer.app")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("app", help="open the interactive authorizer (the default)")
    add_app_options(parser)
    parser.set_defaults(handler=run)


def add_app_options(parser: argparse.ArgumentParser) -> None:
    add_serving_options(parser)
    parser.add_argument(
        "--no-double-press",
        action="store_true",
        help="commit y / s / n on the first press (an ask with hidden characters still needs two)",
    )
    parser.add_argument(
        "--grace-ms", type=int, default=None, metavar="MS",
        help="decision keys are inert this long after the visible ask changes (default 500)",
    )


def ui_settings(args: argparse.Namespace) -> UiSettings:
    """The pi config's knobs (global and project layers), then command-line overrides."""
    base = UiSettings()
    try:
        from core.rules.config import PolicyStore

        knobs = PolicyStore(agent_dir(), project_dir=Path.cwd()).policy("").settings
        base = UiSettings(
            double_press=knobs.double_press_to_confirm,
            forwarding_timeout_ms=knobs.forwarding_timeout_ms,
            prompt_notifications=tuple(knobs.prompt_notifications),
            dialog_keys=dict(knobs.permission_dialog_keys),
        )
    except Exception as exc:  # the rules engine is optional here: defaults are safe
        log.warning("pi config not read (%s); using the defaults", exc)
    double = False if getattr(args, "no_double_press", False) else base.double_press
    grace = args.grace_ms if getattr(args, "grace_ms", None) is not None else base.input_grace_ms
    return UiSettings(
        double_press=double,
        forwarding_timeout_ms=base.forwarding_timeout_ms,
        prompt_notifications=base.prompt_notifications,
        input_grace_ms=max(0, grace),
        dialog_keys=base.dialog_keys,
    )


def with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Bare `pi-authorizer` parses no serving options: fill in what `app` would have defaulted."""
    parser = argparse.ArgumentParser(add_help=False)
    add_app_options(parser)
    filled = parser.parse_args([])
    for name, value in vars(args).items():
        setattr(filled, name, value)
    return filled


def run(args: argparse.Namespace) -> int:
    from tui.app import AuthorizerApp

    args = with_defaults(args)

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        print("pi-authorizer: the app needs a terminal; use `pi-authorizer serve` headless.", file=sys.stderr)
        return 2
    configure_logging(getattr(args, "verbose", False))
    # Logging on stderr would tear the screen: keep only errors, after the app exits.
    logging.getLogger("pi_authorizer").setLevel(logging.ERROR)
    settings = ui_settings(args)
    human = HumanAuthorizer()
    core = ServingCore(
        forwarding_root(args), state_dir(args), terminal=human,
        timeout_ms=lambda: settings.forwarding_timeout_ms,
    )
    ids = session_ids(args)
    taken = take_sessions(core, ids)
    if not taken:
        print("pi-authorizer: no session left to serve", file=sys.stderr)
        return 3
    app = AuthorizerApp(core, human, settings)
    try:
        code = app.run()
    finally:
        # Belt and braces: `stop_serving` already did this on a normal quit.
        for served in core.sessions.values():
            served.heartbeat.clear()
            served.lock.release()
    if not args.sessions and taken:
        print(f"pi-authorizer: served {taken[0]}; agents forward here with:\n  {env_line(taken[0])}",
              file=sys.stderr)
    return code if isinstance(code, int) else 0
