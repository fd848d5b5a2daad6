"""Options and wiring shared by the commands that serve: where to serve, which sessions, how."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
import signal
import sqlite3
import sys
import tempfile
import uuid
from pathlib import Path

from core.asks import TerminalSlot
from core.authorizers import parse_link_spec
from core.files import read_small, replace_file
from core.history import HistoryStore, HistoryTooNew, Retention
from core.human import HumanAuthorizer
from core.judging import RecordedAuthority
from core.liveness import SessionHeld
from core.paths import (
    InvalidSessionId,
    agent_dir,
    default_forwarding_root,
    default_state_dir,
    normalize_session_id,
)
from core.paths import env_line as env_line  # re-exported: tui.commands.{app,serve} import it here
from core.paths import forwarding_env as forwarding_env  # re-exported: tui.commands.run imports it here
from core.serving import ServingCore
from core.tree import Anchor, UnsafeFolder
from core.wiring import NodeOptions, build_attended_node, build_node

DEFAULT_SESSION_FILE = "default-session-id"

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def duration_arg(text: str) -> float:
    """argparse type: `90s`, `15m`, `2h`, `7d`, `1w` or a sum like `1h30m` (seconds)."""
    cleaned = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", cleaned):
        return float(cleaned)
    if not cleaned or _PART.sub("", cleaned):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 90s, 15m, 2h, 7d or 1h30m")
    return sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(cleaned))


class CliError(Exception):
    """Command-line input this command cannot use: printed as one line (no traceback), exit 2."""


def session_id_arg(raw: str) -> str:
    """argparse type: a session id pi would accept, or a usage error saying why not."""
    try:
        session_id = normalize_session_id(raw)
    except InvalidSessionId as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if session_id in {".", ".."}:
        # encodeURIComponent leaves dots alone: the inbox would be `sessions/..`, outside the tree.
        raise argparse.ArgumentTypeError(f"session id {raw!r} would name a folder outside sessions/")
    return session_id


def non_negative_int(raw: str) -> int:
    """argparse type: a whole number >= 0."""
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} is negative")
    return value


def positive_float(raw: str) -> float:
    """argparse type: a number of seconds > 0."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{raw!r} must be a positive number of seconds")
    return value


def existing_file(raw: str) -> Path:
    """argparse type: a file that exists now (a missing rules file is a typo, not an empty config)."""
    path = Path(raw).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{raw}: no such file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{raw}: not a regular file")
    return path


def link_spec_arg(raw: str) -> str:
    """argparse type: `NAME=COMMAND`, checked now so a typo is not found at the first ask."""
    try:
        parse_link_spec(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return raw


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
    """The state dir and forwarding root must be usable before anything is served or locked."""
    usable_dir("state dir", state_dir(args))
    usable_dir("forwarding root", forwarding_root(args))


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
        "--forwarding-root",
        type=Path,
        default=None,
        metavar="DIR",
        help="forwarding root (default: $PI_CODING_AGENT_DIR or ~/.pi/agent, then "
        "sessions/permission-forwarding)",
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


def default_session_id(state: Path) -> str:
    """This authorizer's own session id: minted once, kept in the state dir so env lines stay valid.

    Read and written by descriptor: a link in its place is replaced, never followed.
    """
    with Anchor(state, "state dir").folder(create=True) as fd:
        data = read_small(fd, DEFAULT_SESSION_FILE, 4096)
        with contextlib.suppress(UnicodeDecodeError, InvalidSessionId):
            if data is not None:
                return normalize_session_id(data.decode("utf-8"))
        minted = f"pi-authorizer-{uuid.uuid4()}"
        replace_file(fd, DEFAULT_SESSION_FILE, (minted + "\n").encode("utf-8"))
        return minted


def session_ids(args: argparse.Namespace) -> list[str]:
    """The sessions named on the command line (validated), or the default one."""
    given: list[str] = args.sessions
    if not given:
        return [default_session_id(state_dir(args))]
    return list(dict.fromkeys(given))


def configure_logging(verbose: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger("pi_authorizer")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


def take_sessions(core: ServingCore, ids: list[str]) -> list[str]:
    """Serve what can be served; say who serves the rest. Returns the ids taken."""
    taken: list[str] = []
    for sid in ids:
        try:
            served = core.add_session(sid)
            taken.append(sid)
        except SessionHeld as exc:
            print(f"pi-authorizer: not serving {sid!r}: {exc.holder} serves it", file=sys.stderr)
            continue
        except UnsafeFolder as exc:
            print(f"pi-authorizer: not serving {sid!r}: {exc}", file=sys.stderr)
            continue
        if isinstance(core.ledger, HistoryStore):
            # Asks whose children gave up while nobody served: closed now, not `pending` forever.
            core.ledger.reconcile_open(sid, set(served.inbox.list_request_names()))
    return taken


def install_stop_signals(core: ServingCore) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, core.stop)


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


def node_options(args: argparse.Namespace) -> NodeOptions:
    """The command line as `core.wiring` options (paths expanded, links parsed)."""
    given: Path | None = args.agent_dir
    project: Path | None = args.project
    rules: Path | None = args.rules
    return NodeOptions(
        forwarding_root=forwarding_root(args),
        state_dir=state_dir(args),
        agent_dir=(given or agent_dir()).expanduser(),
        project=(project or Path.cwd()).expanduser(),
        rules_file=rules.expanduser() if rules else None,
        accept_widening=bool(getattr(args, "accept_widening_reloads", False)),
        links=tuple(parse_link_spec(spec, args.link_timeout) for spec in args.links),
    )


def build_core(args: argparse.Namespace, terminal: TerminalSlot) -> tuple[ServingCore, RecordedAuthority]:
    """A headless node for these options (`core.wiring.build_node`)."""
    node = build_node(node_options(args), open_history(args), terminal)
    return node.core, node.authority


def build_attended(args: argparse.Namespace) -> tuple[ServingCore, RecordedAuthority, HumanAuthorizer]:
    """A node a person attends, for these options (`core.wiring.build_attended_node`)."""
    node, person = build_attended_node(node_options(args), open_history(args))
    return node.core, node.authority, person


def open_history(args: argparse.Namespace) -> HistoryStore | None:
    """The history ledger in the state dir, unless `--no-history`; unusable means refuse to serve."""
    if not args.history:
        return None
    try:
        return HistoryStore.in_state_dir(state_dir(args), retention(args))
    except (sqlite3.Error, HistoryTooNew) as exc:
        raise SystemExit(f"pi-authorizer: the history cannot be opened ({exc}); use --no-history") from exc
