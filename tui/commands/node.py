"""The command line's side of building a node for `serve`, `run`, `app` and `demo`.

The options become a `core.wiring.NodeOptions` and `core.wiring` builds the object graph (the one place
that does); here: the history as the CLI opens it, taking sessions, stop signals and log lines.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import signal
import sqlite3
import sys
from pathlib import Path
from typing import TextIO

from core.clock import SYSTEM_CLOCK, Clock
from core.courier.broker_access import BrokerAccess, BrokerAccessError, read_broker_access
from core.courier.targets import Target, TargetError, parse_target
from core.disk.paths import agent_dir
from core.disk.tree import UnsafeFolder
from core.forwarding.liveness import SessionHeld
from core.history import HistoryStore, HistoryTooNew
from core.judging.judge_setup import JudgeSettingsError
from core.judging.links import parse_link_spec
from core.seams import Seams
from core.serving import ServingCore
from core.text import LineFormatter, log_safe
from core.vocabulary.asks import Arbiter
from core.wiring import AttendedNode, HistoryFailed, Node, NodeOptions, build_attended_node, build_node
from tui.commands.arguments import CliError
from tui.commands.judge_options import judge_from_args
from tui.commands.log_sink import TurnBufferedHandler
from tui.commands.options import check_serving_dirs, forwarding_root, retention, session_ids, state_dir
from tui.commands.own_session import held_message


def forward_target(args: argparse.Namespace) -> Target | None:
    """`--forward-to`, parsed in the one place targets are (`core.courier.targets`); a bad one is a
    usage error (one line, exit 2)."""
    text: str | None = getattr(args, "forward_to", None)
    if text is None:
        return None
    try:
        return parse_target(text, session_ids(args))
    except TargetError as exc:
        raise CliError(str(exc)) from exc


def broker_access(args: argparse.Namespace) -> BrokerAccess | None:
    """`--broker-access FILE`, read in the one place it is (`core.courier.broker_access`); a file that
    cannot be used is a usage error (one line, exit 2)."""
    path: Path | None = getattr(args, "broker_access", None)
    if path is None:
        return None
    try:
        return read_broker_access(path)
    except BrokerAccessError as exc:
        raise CliError(f"--broker-access {exc}") from exc


def check_usage(args: argparse.Namespace) -> None:
    """Every usage error of a serving command before anything is made or served (exit 2): the
    `--forward-to` target, the `--broker-access` file, then the folders (`check_serving_dirs`)."""
    text: str | None = getattr(args, "forward_to", None)
    if text is not None:
        try:
            parse_target(text, args.sessions)
        except TargetError as exc:
            raise CliError(str(exc)) from exc
    broker_access(args)
    check_serving_dirs(args)


def node_options(args: argparse.Namespace, clock: Clock = SYSTEM_CLOCK) -> NodeOptions:
    """The command line as `core.wiring` options (paths expanded, links parsed)."""
    given: Path | None = args.agent_dir
    project: Path | None = args.project
    rules: Path | None = args.rules
    target = forward_target(args)
    broker: str | None = getattr(args, "broker", None)
    access = broker_access(args)
    return NodeOptions(
        forwarding_root=forwarding_root(args),
        state_dir=state_dir(args),
        agent_dir=(given or agent_dir()).expanduser(),
        project=(project or Path.cwd()).expanduser(),
        rules_file=rules.expanduser() if rules else None,
        accept_widening=bool(getattr(args, "accept_widening_reloads", False)),
        links=tuple(parse_link_spec(spec, args.link_timeout, clock) for spec in args.links),
        judge=judge_from_args(args),
        seams=Seams(clock=clock),
        forward_to=target,
        broker=broker,
        broker_access=access,
        # The node is named by the first session it serves (its own per root, or --session): two nodes on
        # one machine serving different sessions are two approvers, each with its own broker consumer.
        node_name=session_ids(args)[0] if target is not None or broker else "pi-authorizer",
    )


def headless_node(args: argparse.Namespace, arbiter: Arbiter, clock: Clock = SYSTEM_CLOCK) -> Node:
    """A headless node for these options (`core.wiring.build_node`)."""
    options = node_options(args, clock)
    try:
        return build_node(options, open_history(args, clock), arbiter)
    except TargetError as exc:
        raise CliError(str(exc)) from exc
    except JudgeSettingsError as exc:
        raise CliError(f"judge: {exc}") from exc


def attended_node(args: argparse.Namespace, clock: Clock = SYSTEM_CLOCK) -> AttendedNode:
    """A node a person attends (`core.wiring.build_attended_node`)."""
    options = node_options(args, clock)
    try:
        return build_attended_node(options, open_history(args, clock))
    except TargetError as exc:
        raise CliError(str(exc)) from exc
    except JudgeSettingsError as exc:
        raise CliError(f"judge: {exc}") from exc


def open_history(args: argparse.Namespace, clock: Clock = SYSTEM_CLOCK) -> HistoryStore | None:
    """The history ledger in the state dir, unless `--no-history`; unusable means refuse to serve."""
    if not args.history:
        return None
    attempts = 0
    while True:
        try:
            return HistoryStore.in_state_dir(state_dir(args), retention(args), Seams(clock=clock))
        except (sqlite3.Error, HistoryTooNew, OSError) as exc:
            cause = log_safe(str(exc), 400)
            if not _waiting_for_disk(exc):
                why = f"the history cannot be opened ({cause}); use --no-history"
                raise SystemExit(f"pi-authorizer: {why}") from exc
            if attempts < 3 or attempts % 60 == 0:  # a full or failing disk: said at first, then every minute
                print(f"pi-authorizer: waiting for disk: the history cannot be opened ({cause}); "
                      "retrying every second", file=sys.stderr, flush=True)
            attempts += 1
            clock.sleep(1.0)


def _waiting_for_disk(exc: BaseException) -> bool:
    """A full or failing disk (worth waiting for), not a history this program cannot use."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO)
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("disk" in text or "full" in text)


def take_sessions(node: Node | AttendedNode, ids: list[str], default: bool = False) -> list[str]:
    """Serve what can be served (`take_session`: the history reconciled); say who serves the rest
    (pid and command) and how to serve another (`default`: `ids` is this root's own session).
    Returns the ids taken."""
    taken: list[str] = []
    for sid in ids:
        try:
            node.take_session(sid)
            taken.append(sid)
        except SessionHeld as exc:
            print(f"pi-authorizer: {held_message(sid, exc.holder, default)}", file=sys.stderr)
        except UnsafeFolder as exc:
            print(f"pi-authorizer: not serving {sid!r}: {log_safe(str(exc), 400)}", file=sys.stderr)
        except HistoryFailed as exc:
            from tui.sanitize import safe_plain  # imports Textual: only when there is something to print

            taken.append(sid)
            print(f"pi-authorizer: error: serving {sid!r}, but the history failed to close the asks "
                  f"withdrawn while no one served it: {safe_plain(str(exc))}", file=sys.stderr)
    return taken


def install_stop_signals(core: ServingCore) -> None:
    """SIGINT and SIGTERM stop serving, also when the loop's self-pipe is full.

    asyncio hands a signal to its loop as a byte in the self-pipe every `call_soon_threadsafe` also
    writes a byte into: the threads' wake-ups (each executor job done) fill it while one loop step runs
    long (278 bytes on Linux; a restart's backlog after a full disk filled it), and a signal arriving
    then was lost, so `serve` never stopped (docs/design/reliability.md, stall6). The loop's handler
    stays for its wake-up (silent when the pipe is full: the pipe is readable then anyway); the
    Python-level handler, run in the main thread whatever the pipe holds, asks for the stop (not of a
    loop closed already: asyncio removes its handlers only after it closed, review3 finding 2)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, core.stop)
        signal.signal(sig, lambda _signum, _frame: loop.is_closed() or loop.call_soon_threadsafe(core.stop))
    signal.set_wakeup_fd(signal.set_wakeup_fd(-1), warn_on_full_buffer=False)


def configure_logging(verbose: bool = False, stream: TextIO | None = None) -> None:
    """The `pi_authorizer` log lines go to `stream`: stderr unless the app draws there."""
    handler = TurnBufferedHandler(stream or sys.stderr)
    # The format uses none of these: a record need not look them up (about 2 µs a line), nor walk the
    # stack for its caller's file and line (`_srcfile = None`, logging's own switch: about 3 µs).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    handler.setFormatter(LineFormatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger("pi_authorizer")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
