"""The options the serving commands share and what they resolve to: where, which sessions, how long."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from pathlib import Path

from core.courier.broker import broker_url
from core.disk.paths import (
    ROOT_IN_AGENT_DIR,
    agent_dir_of,
    default_forwarding_root,
    default_state_dir,
)
from core.history import Retention
from core.text import log_safe
from tui.commands.arguments import (
    CliError,
    duration_arg,
    existing_file,
    link_spec_arg,
    non_negative_int,
    positive_float,
    session_id_arg,
)
from tui.commands.judge_options import add_judge_options
from tui.commands.own_session import default_session_id


def broker_arg(text: str) -> str:
    """`--broker`: `nats://HOST:PORT`, checked where the broker's layout is (`core.courier.broker`)."""
    try:
        return broker_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_serving_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session",
        dest="sessions",
        action="append",
        default=[],
        metavar="ID",
        type=session_id_arg,
        help="a session id to serve (repeatable); default: this authorizer's own session id",
    )
    parser.add_argument(
        "--forward-to",
        default=None,
        metavar="TARGET",
        help="carry the asks this node's rules leave undecided to TARGET (session:ID under the same "
        "forwarding root, or nats://HOST:PORT) and answer its verdict; docs/remote.md",
    )
    parser.add_argument(
        "--broker",
        default=None,
        metavar="nats://HOST:PORT",
        type=broker_arg,
        help="also serve the asks couriers put on this NATS JetStream broker (judged by this node's "
        "rules first, then the person or --on-ask; one verdict per ask among approvers); docs/remote.md",
    )
    parser.add_argument(
        "--broker-access",
        type=Path,
        default=None,
        metavar="FILE",
        help="credentials and TLS for the broker (--broker, --forward-to nats://): a TOML file only you "
        "may read, with user and password or password_file, or creds; ca, cert, key; docs/remote.md",
    )
    parser.add_argument(
        "--forwarding-root",
        type=Path,
        default=None,
        metavar="DIR",
        help="forwarding root (default: $PI_CODING_AGENT_DIR or ~/.pi/agent, then "
        "sessions/permission-forwarding); one that does not exist is refused unless --create",
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="create a --forwarding-root that does not exist yet (mode 700)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="pi-authorizer's own state: locks, quarantine, history (default: the user state dir)",
    )
    parser.add_argument(
        "--history",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="record every ask served in the state dir's history (default: on)",
    )
    add_retention_options(parser)


def add_retention_options(parser: argparse.ArgumentParser) -> None:
    """How long the history keeps rows (applied when it opens, then every few hundred asks)."""
    defaults = Retention()
    parser.add_argument(
        "--keep-history",
        type=duration_arg,
        default=defaults.max_age_s,
        metavar="DURATION",
        help="drop history rows older than this, e.g. 30d (0: no age limit; default 180d)",
    )
    parser.add_argument(
        "--keep-history-rows",
        type=non_negative_int,
        default=defaults.max_rows,
        metavar="N",
        help=f"keep at most N history rows (0: no limit; default {defaults.max_rows:,})",
    )


def add_rules_options(parser: argparse.ArgumentParser) -> None:
    """Where this node's own rules come from (the pi config a user already has) and its chain."""
    parser.add_argument(
        "--agent-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="pi agent dir whose config and agents/ apply (default: $PI_CODING_AGENT_DIR or ~/.pi/agent)",
    )
    parser.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="project whose .pi config and .pi/agents apply (default: the current directory)",
    )
    parser.add_argument(
        "--rules",
        type=existing_file,
        default=None,
        metavar="FILE",
        help="pi-authorizer's own rules file (config.json shape), applied last with origin 'authorizer'",
    )
    parser.add_argument(
        "--accept-widening-reloads",
        action="store_true",
        help="apply a config change that widens a permission (a new allow, a removed deny, yolo) "
        "without review; by default it is logged and held (the app asks)",
    )
    parser.add_argument(
        "--link",
        dest="links",
        action="append",
        default=[],
        type=link_spec_arg,
        metavar="NAME=COMMAND",
        help="a chain link: run COMMAND with the facts as JSON on stdin (repeatable, in order)",
    )
    parser.add_argument(
        "--link-timeout",
        type=positive_float,
        default=10.0,
        metavar="SECONDS",
        help="how long a chain link may take before it counts as defer (default 10)",
    )
    add_judge_options(parser)


def retention(args: argparse.Namespace) -> Retention:
    age: float | None = args.keep_history
    rows: int | None = args.keep_history_rows
    return Retention(max_age_s=age or None, max_rows=rows or None)


def forwarding_root(args: argparse.Namespace) -> Path:
    root: Path | None = args.forwarding_root
    return (root or default_forwarding_root()).expanduser()


def state_dir(args: argparse.Namespace) -> Path:
    base: Path | None = args.state_dir
    return (base or default_state_dir()).expanduser()


def usable_dir(label: str, path: Path) -> Path:
    """Create `path` if missing and prove it writable, or raise `CliError` saying which and why."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{label} {path}: cannot create it ({exc.strerror or exc})") from None
    if not path.is_dir():
        raise CliError(f"{label} {path}: not a directory")
    try:
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".pi-authorizer-probe-")  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"{label} {path}: not writable ({exc.strerror or exc})") from None
    probe.close()
    return path


def check_serving_dirs(args: argparse.Namespace) -> None:
    """The state dir and forwarding root must be usable before anything is served or locked. A
    `--forwarding-root` that does not exist is refused with the closest existing path (a typo must
    not be created and served in silence) unless `--create`; one outside the standard layout (no
    child can be pointed at it) is said on stderr."""
    given: Path | None = args.forwarding_root
    root = forwarding_root(args)
    missing = given is not None and not root.exists()
    if missing and not getattr(args, "create", False):
        close = closest_existing(root)
        hint = f"did you mean {close}? " if close is not None else ""
        raise CliError(f"--forwarding-root {root} does not exist; {hint}(--create creates it)")
    usable_dir("state dir", state_dir(args))
    usable_dir("forwarding root", root)
    for warning in root_warnings(root, missing):
        print(f"pi-authorizer: warning: {log_safe(warning, 600)}", file=sys.stderr)


def closest_existing(path: Path) -> Path | None:
    """The existing folder `path` most likely meant: each missing part replaced by the closest name
    beside it (`agnet` → `agent`), as far as one is close; else the deepest existing folder above it."""
    absolute = Path(os.path.abspath(path))
    here = Path(absolute.anchor)
    parts = absolute.parts[1:]
    for number, part in enumerate(parts):
        if (here / part).is_dir():
            here = here / part
            continue
        try:
            names = sorted(entry.name for entry in os.scandir(here) if entry.is_dir())
        except OSError:
            names = []
        close = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
        if not close:
            break
        here = here / close[0]
        if number == len(parts) - 1:
            return here
    return None if here == Path(absolute.anchor) or here == absolute else here


def root_warnings(root: Path, missing: bool = False) -> list[str]:
    """Why no child may write to `root`: it was just created, or it is outside the layout children use."""
    warnings = []
    if missing:
        warnings.append(f"--forwarding-root {root} did not exist, so no child wrote there yet (a typo?); "
                        "created it")
    if agent_dir_of(root) is None:
        warnings.append(f"no pi child writes to {root}: children write under <agentDir>/{ROOT_IN_AGENT_DIR} "
                        "(their PI_CODING_AGENT_DIR)")
    return warnings


def session_ids(args: argparse.Namespace) -> list[str]:
    """The sessions named on the command line (validated), or the default one."""
    given: list[str] = args.sessions
    if not given:
        return [default_session_id(state_dir(args), forwarding_root(args))]
    return list(dict.fromkeys(given))
