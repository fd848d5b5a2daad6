"""`pi-authorizer history`: the asks this authorizer served, as a table or as JSON Lines.

Every string in the table came from a child, so it is escaped (controls, bidi and other invisible
code points become `\\uXXXX`) before it reaches the terminal; `--json` keeps the stored values and
lets the JSON encoder escape them.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

from core.clock import SYSTEM_CLOCK
from core.disk.paths import default_state_dir
from core.history import HISTORY_FILE, HistoryFilter, HistoryRow, HistoryStore, HistoryTooNew
from core.history.review_log import default_review_log, import_review_log
from core.text import log_safe
from tui.commands.arguments import CliError, duration_arg, non_negative_int, session_id_arg
from tui.commands.options import add_retention_options, retention

_COLUMNS = (
    ("TIME", 19),
    ("AGENT", 14),
    ("SURFACE", 10),
    ("VALUE", 40),
    ("VERDICT", 20),
    ("BY", 34),
    ("WAIT", 8),
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("history", help="show the asks this authorizer served")
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per line with every stored field (bytes as base64; every time in "
        "milliseconds: instants since the epoch, decide_ms a span)",
    )
    parser.add_argument("--since", type=duration_arg, metavar="DURATION", help="only asks newer than this")
    parser.add_argument("--agent", metavar="NAME", help="only this agent's asks")
    parser.add_argument(
        "--session", metavar="ID", type=session_id_arg,
        help="only asks served for, or sent from, this session",
    )
    parser.add_argument(
        "--verdict",
        metavar="V",
        help="approved, denied (each with its variants), an exact state, or an outcome "
        "such as withdrawn, quarantined, left, pending",
    )
    parser.add_argument(
        "--limit", type=non_negative_int, default=50, metavar="N", help="newest N asks (0: all; 50)"
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="pi-authorizer's state dir (default: the user state dir)",
    )
    add_retention_options(parser)
    parser.add_argument(
        "--import-pi-log",
        type=Path,
        nargs="?",
        const=default_review_log(),
        default=None,
        metavar="FILE",
        help="first import pi's own review log (read-only; default: "
        "<agentDir>/extensions/pi-permission-system/logs/...-permission-review.jsonl)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    state: Path = (args.state_dir or default_state_dir()).expanduser()
    path = state / HISTORY_FILE
    if not path.exists() and args.import_pi_log is None:
        print(f"pi-authorizer: no history yet ({log_safe(str(path), 400)})", file=sys.stderr)
        return 0
    try:
        store = HistoryStore(path, retention(args))
    except (sqlite3.Error, HistoryTooNew, OSError) as exc:
        raise CliError(f"the history {path} cannot be opened: {exc}") from None
    try:
        if args.import_pi_log is not None:
            try:
                result = import_review_log(store, args.import_pi_log.expanduser())
            except OSError as exc:
                cause = log_safe(f"{args.import_pi_log}: {exc}", 400)
                print(f"pi-authorizer: cannot read {cause}", file=sys.stderr)
                return 1
            print(
                f"imported {result.imported} decisions from pi's review log ({result.already} already "
                f"there, {result.expired} past retention, {result.skipped} unreadable lines skipped)",
                file=sys.stderr,
            )
        where = HistoryFilter(
            agent=args.agent,
            session=args.session,
            verdict=args.verdict,
            since=SYSTEM_CLOCK.wall() - args.since if args.since is not None else None,
        )
        rows = store.query(where, args.limit or None)[::-1]
    finally:
        store.close()
    out = sys.stdout
    if args.json:
        for row in rows:
            out.write(json.dumps(row.to_json(), ensure_ascii=True) + "\n")
        return 0
    out.write(_line([name for name, _ in _COLUMNS]) + "\n")
    for row in rows:
        out.write(_line(_cells(row)) + "\n")
    return 0


def _cells(row: HistoryRow) -> list[str]:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.arrived_at))
    verdict = row.verdict or row.outcome
    wait = "" if row.decide_ms is None else _wait(row.decide_ms)
    by = row.decider or row.outcome
    if row.source != "served":
        by = f"{by} [{row.source}]"
    agent = row.agent or "?"
    if row.agent_mismatch() is not None:
        agent = f"{agent} [requester {row.requester_agent()}]"
    return [stamp, agent, row.surface or "?", row.value or "", verdict, by, wait]


def _line(cells: list[str]) -> str:
    parts = []
    for (_, width), cell in zip(_COLUMNS, cells, strict=True):
        parts.append(log_safe(cell, width).ljust(width))
    return "  ".join(parts).rstrip()


def _wait(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    return f"{ms / 60_000:.1f}m"
