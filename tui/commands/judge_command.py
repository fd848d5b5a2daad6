"""`pi-authorizer history judge`: the model judge measured against the person, per surface: how often
it agreed with your verdicts, what it would have allowed that you denied and denied that you allowed,
how often it failed, and its latency. Read-only, from its record and the history; `--json` prints one
object per surface."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

from core.disk.paths import default_state_dir
from core.history import HISTORY_FILE
from core.judging.judge_record import JUDGE_FILE, measure
from core.text import log_safe
from tui.commands.arguments import CliError
from tui.render.judge_advice import MEASURE_COLUMNS, disagreement_lines, measure_rows

#: Its parser's name: `tui.cli` turns `history judge ...` into it.
COMMAND = "history-judge"
VERB = "judge"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        COMMAND, prog="pi-authorizer history judge",
        description="The model judge (--judge) against your verdicts, per surface (read-only).")
    parser.add_argument("--json", action="store_true", help="one JSON object per surface")
    parser.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                        help="pi-authorizer's state dir (default: the user state dir)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    state: Path = (args.state_dir or default_state_dir()).expanduser()
    record = state / JUDGE_FILE
    if not record.exists():
        print(f"pi-authorizer: the model judge has reviewed nothing here yet ({log_safe(str(record), 400)})",
              file=sys.stderr)
        return 0
    try:
        measures = measure(record, state / HISTORY_FILE)
    except sqlite3.Error as exc:
        raise CliError(f"the judge's record {record} cannot be read: {exc}") from None
    if args.json:
        for m in measures:
            print(json.dumps(m.as_json(), ensure_ascii=True))
        return 0
    rows = [MEASURE_COLUMNS, *measure_rows(measures)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(MEASURE_COLUMNS))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    lines = disagreement_lines(measures)
    if lines:
        print()
        print("\n".join(lines))
    return 0
