"""`pi-authorizer explain REQUEST.json`: how this node's rules would judge a request file.

Reads the file with the wire layer's tolerant reader, resolves its child-fixed facts against the
layered config (global, project, agent files, `--rules`), and prints the verdict and the trail.
Exit 0 whatever the verdict; 2 when the file is unreadable or not a usable request.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.disk.paths import agent_dir
from core.rules import PolicyStore
from core.rules.explain import explain
from core.wire.reader import RequestRejected, parse_request
from core.wire.request import ParsedRequest
from tui.commands.arguments import existing_file


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `explain` and its options."""
    parser = subparsers.add_parser("explain", help="show how the rules judge a request file")
    parser.add_argument("request", type=Path, metavar="REQUEST.json")
    parser.add_argument(
        "--agent-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="pi agent dir (default: $PI_CODING_AGENT_DIR or ~/.pi/agent)",
    )
    parser.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="project whose .pi config applies (default: the current directory)",
    )
    parser.add_argument(
        "--rules",
        type=existing_file,
        default=None,
        metavar="FILE",
        help="pi-authorizer's own rules file, applied last (origin 'authorizer')",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def _agent_dir(given: Path | None) -> Path:
    return given.expanduser() if given is not None else agent_dir()


def run(args: argparse.Namespace) -> int:
    """Explain one request file; see the module docstring for exit codes."""
    try:
        parsed = parse_request(Path(args.request).read_bytes())
    except OSError as exc:
        print(_safe(f"pi-authorizer explain: cannot read {args.request}: {exc.strerror or exc}"),
              file=sys.stderr)
        return 2
    except RequestRejected as exc:
        print(_safe(f"pi-authorizer explain: {args.request} is not a usable request: {exc.reason}"),
              file=sys.stderr)
        return 2
    project = (args.project or Path.cwd()).expanduser()
    rules_file = args.rules.expanduser() if args.rules else None
    store = PolicyStore(_agent_dir(args.agent_dir), project, rules_file)
    result = explain(store, parsed.facts, parsed.agent_name)
    if args.json:
        # ASCII only: a bidi or other invisible character in a child's value stays a \\u escape.
        print(json.dumps(result.to_json(), ensure_ascii=True))
        return 0
    for error in result.config_errors:
        print(_safe(f"config error: {error.path}: {error.key}: {error.reason}"), file=sys.stderr)
    lines = [*request_lines(parsed), "", *result.text]
    if result.deny_reason:
        lines.append(f"deny reason: {result.deny_reason}")
    print("\n".join(_safe(line) for line in lines))
    return 0


def _safe(line: str) -> str:
    """Every printed line as the app shows child text: controls, escapes, bidi as visible tokens."""
    from tui.sanitize import safe_plain  # imports Textual: only when there is something to print

    return safe_plain(line)


def request_lines(parsed: ParsedRequest) -> list[str]:
    """The facts the verdict is about, before the trail (child text, sanitised by the caller)."""
    request = parsed.request
    intent = parsed.access_intent
    lines = [f"request {request.id} from agent {request.requester_agent_name}"]
    if intent is None:
        lines.append("no usable accessIntent (no child-fixed facts): rules cannot match it")
        lines.append(f"display: {request.surface or '?'} {request.value or ''}")
        return lines
    if intent.principal.agent_name != request.requester_agent_name:
        lines.append(f"principal agent {intent.principal.agent_name} (the rules use this one)")
    lines.append(f"surface {intent.surface}")
    lines += [f"  value {value}" for value in intent.match_values]
    if intent.boundary_value is not None:
        lines.append(f"boundary {intent.boundary_value}")
    return lines
