"""`pi-authorizer history`: the asks this authorizer served, as a table or as JSON Lines; and
`history prune`, the one command that deletes rows (asked first, and saying what it dropped).

Listing never deletes: the history is opened without retention limits (the serving commands apply
theirs while they serve). Every string in the table came from a child, so it is escaped (controls,
bidi and other invisible code points become `\\uXXXX`) before it reaches the terminal; `--json`
(JSON Lines) keeps the stored values and lets the JSON encoder escape them.
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
from core.history.queries import VERDICT_TERMS
from core.history.review_log import default_review_log, import_review_log
from core.history.transactions import Retention
from core.text import log_safe
from tui.commands.arguments import CliError, duration_arg, non_negative_int, one_of, session_id_arg

#: `history prune`'s parser: `tui.cli` turns `history ... prune ...` into this command name.
PRUNE = "history-prune"
VERB = "prune"

_COLUMNS = (
    ("TIME", 19),
    ("AGENT", 14),
    ("SURFACE", 10),
    ("VALUE", 40),
    ("VERDICT", 20),
    ("BY", 34),
    ("DECIDED IN", 10),
    ("REASON", 40),
)
#: Listing and importing never prune: only `history prune` deletes rows.
_KEEP_ALL = Retention(max_age_s=None, max_rows=None)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "history",
        help="show the asks this authorizer served (read-only; `history prune` deletes old rows)",
        epilog="Deleting old rows is its own command: history prune --older-than DURATION "
        "[--keep-rows N] [-y] (asks first, says what it dropped).",
    )
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
        type=one_of("verdict", VERDICT_TERMS),
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
    prune = subparsers.add_parser(
        PRUNE,  # typed as `history prune` (`tui.cli` routes it here); not listed on its own
        prog="pi-authorizer history prune",
        description="Delete history rows older than a duration, and/or all but the newest N rows. "
        "An answer not yet known written is never deleted.",
    )
    prune.add_argument(
        "--older-than", type=duration_arg, default=0.0, metavar="DURATION",
        help="delete rows that arrived longer ago than this, e.g. 30d",
    )
    prune.add_argument(
        "--keep-rows", type=non_negative_int, default=0, metavar="N",
        help="then keep at most the newest N rows (0: no row limit; the default)",
    )
    prune.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    prune.add_argument(
        "--state-dir", type=Path, default=None, metavar="DIR",
        help="pi-authorizer's state dir (default: the user state dir)",
    )
    prune.set_defaults(handler=run_prune)


def run_prune(args: argparse.Namespace) -> int:
    """Count what the limits would drop, ask (unless `-y`), delete, and say how many went."""
    limits = Retention(max_age_s=args.older_than or None, max_rows=args.keep_rows or None)
    if limits.max_age_s is None and limits.max_rows is None:
        raise CliError("history prune: say what to delete: --older-than DURATION and/or --keep-rows N")
    state: Path = (args.state_dir or default_state_dir()).expanduser()
    path = state / HISTORY_FILE
    if not path.exists():
        print(f"pi-authorizer: no history yet ({log_safe(str(path), 400)}); nothing to prune",
              file=sys.stderr)
        return 0
    try:
        store = HistoryStore(path, _KEEP_ALL)
    except (sqlite3.Error, HistoryTooNew, OSError) as exc:
        raise CliError(f"the history {path} cannot be opened: {exc}") from None
    try:
        total = store.summary().total
        doomed = store.prune_count(limits)
        what = _limits_text(limits)
        if doomed == 0:
            print(f"nothing to prune: none of the {total} rows is {what}")
            return 0
        if not args.yes:
            if not sys.stdin.isatty():
                raise CliError(f"history prune would delete {doomed} of {total} rows; confirm with -y")
            answer = input(f"Delete {doomed} of {total} history rows ({what})? [y/N] ")
            if answer.strip().lower() not in {"y", "yes"}:
                print("nothing deleted")
                return 1
        removed = store.prune_with(limits)
        print(f"deleted {removed} of {total} history rows ({what}); {total - removed} kept")
        return 0
    finally:
        store.close()


def _limits_text(limits: Retention) -> str:
    parts = []
    if limits.max_age_s is not None:
        parts.append(f"older than {_span(limits.max_age_s)}")
    if limits.max_rows is not None:
        parts.append(f"beyond the newest {limits.max_rows}")
    return " or ".join(parts)


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"


def run(args: argparse.Namespace) -> int:
    state: Path = (args.state_dir or default_state_dir()).expanduser()
    path = state / HISTORY_FILE
    if not path.exists() and args.import_pi_log is None:
        print(f"pi-authorizer: no history yet ({log_safe(str(path), 400)})", file=sys.stderr)
        return 0
    try:
        store = HistoryStore(path, _KEEP_ALL)
    except (sqlite3.Error, HistoryTooNew, OSError) as exc:
        raise CliError(f"the history {path} cannot be opened: {exc}") from None
    try:
        if args.import_pi_log is not None:
            try:
                result = import_review_log(store, args.import_pi_log.expanduser(), retention=Retention())
            except OSError as exc:
                cause = log_safe(f"{args.import_pi_log}: {exc.strerror or exc}", 400)
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
        rows = store.query(where, args.limit or None)  # newest first, as the app lists them
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
    wait = "" if row.decide_ms is None else _seconds(row.decide_ms)
    by = row.decider or row.outcome
    if row.source != "served":
        by = f"{by} [{row.source}]"
    agent = row.agent or "?"
    if row.agent_mismatch() is not None:
        agent = f"{agent} [requester {row.requester_agent()}]"
    return [stamp, agent, row.surface or "?", row.value or "", verdict, by, wait, row.reason or ""]


def _line(cells: list[str]) -> str:
    parts = []
    for (_, width), cell in zip(_COLUMNS, cells, strict=True):
        parts.append(log_safe(cell, width).ljust(width))
    return "  ".join(parts).rstrip()


def _seconds(ms: float) -> str:
    """Time to decide (from shown, or arrival for a rule), always in seconds."""
    return f"{ms / 1000:.3f}s" if ms < 10_000 else f"{ms / 1000:.0f}s"
