"""The one place the serving object graph is built for `serve`, `run`, `app` and `demo`.

`build_core` puts together this node's recorded authority (the pi config it reads), the chain links,
the history ledger and the serving core; `person_core` adds the person as the terminal slot.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from core.asks import TerminalSlot
from core.authorizers import AuthorizerChain, parse_link_spec
from core.history import HistoryStore, HistoryTooNew
from core.human import HumanAuthorizer
from core.judging import LinkChain, RecordedAuthority
from core.liveness import SessionHeld
from core.paths import agent_dir
from core.rules import PolicyStore
from core.serving import ServingCore
from core.tree import UnsafeFolder
from tui.commands.options import forwarding_root, retention, state_dir


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


def build_core(
    args: argparse.Namespace, terminal: TerminalSlot, clock: Callable[[], float] = time.time
) -> tuple[ServingCore, RecordedAuthority]:
    """The serving core with this node's recorded authority, chain and config watcher; `clock`: wall time."""
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
        clock=clock,
    )
    if history is not None:
        core.subscribe(history.observe)
    core.add_background(authority.watch_config)
    authority.report_config()
    return core, authority


def person_core(
    args: argparse.Namespace, clock: Callable[[], float] = time.time
) -> tuple[ServingCore, HumanAuthorizer, RecordedAuthority]:
    """`build_core` with the person as the terminal slot; the recorded authority keeps their grants."""
    human = HumanAuthorizer()
    core, authority = build_core(args, human, clock)
    human.grants = authority
    return core, human, authority


def open_history(args: argparse.Namespace) -> HistoryStore | None:
    """The history ledger in the state dir, unless `--no-history`; unusable means refuse to serve."""
    if not args.history:
        return None
    try:
        return HistoryStore.in_state_dir(state_dir(args), retention(args))
    except (sqlite3.Error, HistoryTooNew) as exc:
        raise SystemExit(f"pi-authorizer: the history cannot be opened ({exc}); use --no-history") from exc


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


def configure_logging(verbose: bool = False, stream: TextIO | None = None) -> None:
    """The `pi_authorizer` log lines go to `stream`: stderr unless the app draws there."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger("pi_authorizer")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


def forwarding_env(session_id: str) -> dict[str, str]:
    """What a headless pi needs to forward here (20.7.3 also needs the subagent marker)."""
    return {"PI_SUBAGENT_PARENT_SESSION": session_id, "PI_IS_SUBAGENT": "1"}


def env_line(session_id: str) -> str:
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in forwarding_env(session_id).items())
