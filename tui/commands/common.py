"""Options and wiring shared by the commands that serve: where to serve, which sessions, how."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sqlite3
import sys
import uuid
from pathlib import Path

from core.asks import TerminalSlot
from core.authorizers import AuthorizerChain, parse_link_spec
from core.history import HistoryStore, HistoryTooNew
from core.judging import LinkChain, RecordedAuthority
from core.liveness import SessionHeld
from core.paths import (
    InvalidSessionId,
    agent_dir,
    default_forwarding_root,
    default_state_dir,
    normalize_session_id,
)
from core.rules import PolicyStore
from core.serving import ServingCore
from core.tree import Anchor, UnsafeFolder, read_small, replace_file

DEFAULT_SESSION_FILE = "default-session-id"


def session_id_arg(raw: str) -> str:
    """argparse type: a session id pi would accept, or a usage error saying why not."""
    try:
        return normalize_session_id(raw)
    except InvalidSessionId as exc:
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


def forwarding_env(session_id: str) -> dict[str, str]:
    """What a headless pi needs to forward here (20.7.3 also needs the subagent marker)."""
    return {"PI_SUBAGENT_PARENT_SESSION": session_id, "PI_IS_SUBAGENT": "1"}


def env_line(session_id: str) -> str:
    import shlex

    return " ".join(f"{k}={shlex.quote(v)}" for k, v in forwarding_env(session_id).items())


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
            core.add_session(sid)
            taken.append(sid)
        except SessionHeld as exc:
            print(f"pi-authorizer: not serving {sid!r}: {exc.holder} serves it", file=sys.stderr)
        except UnsafeFolder as exc:
            print(f"pi-authorizer: not serving {sid!r}: {exc}", file=sys.stderr)
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
        type=Path,
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
        metavar="NAME=COMMAND",
        help="a chain link: run COMMAND with the facts as JSON on stdin (repeatable, in order)",
    )
    parser.add_argument(
        "--link-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long a chain link may take before it counts as defer (default 10)",
    )


def policy_store(args: argparse.Namespace) -> PolicyStore:
    given: Path | None = args.agent_dir
    project: Path | None = args.project
    rules: Path | None = args.rules
    return PolicyStore(
        (given or agent_dir()).expanduser(),
        (project or Path.cwd()).expanduser(),
        rules.expanduser() if rules else None,
        accept_widening=bool(getattr(args, "accept_widening_reloads", False)),
    )


def build_core(args: argparse.Namespace, terminal: TerminalSlot) -> tuple[ServingCore, RecordedAuthority]:
    """The serving core with this node's recorded authority, chain and config watcher."""
    authority = RecordedAuthority(policy_store(args))
    links = [parse_link_spec(spec, args.link_timeout) for spec in args.links]
    history = open_history(args)
    core = ServingCore(
        forwarding_root(args),
        state_dir(args),
        terminal,
        judge=authority,
        chain=LinkChain(AuthorizerChain(links)) if links else None,
        timeout_ms=lambda: authority.store.policy("").settings.forwarding_timeout_ms,
        ledger=history,
    )
    if history is not None:
        core.subscribe(history.observe)
    core.add_background(authority.watch_config)
    authority.report_config()
    return core, authority


def open_history(args: argparse.Namespace) -> HistoryStore | None:
    """The history ledger in the state dir, unless `--no-history`; unusable means refuse to serve."""
    if not args.history:
        return None
    try:
        return HistoryStore.in_state_dir(state_dir(args))
    except (sqlite3.Error, HistoryTooNew) as exc:
        raise SystemExit(f"pi-authorizer: the history cannot be opened ({exc}); use --no-history") from exc
