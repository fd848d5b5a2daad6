"""One-line and badge renderings of an ask: the detail's header, the risk badge, a batch listing."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from textual.content import Content

from core.disk.paths import ROOT_IN_AGENT_DIR, agent_dir_of, forwarding_env
from core.vocabulary.asks import Ask
from tui.render.ask import Clip, agent_content, value_content
from tui.render.ask_facts import age_seconds, broker_origin, duration
from tui.render.risk import RiskHint
from tui.render.styles import DIM, WARN
from tui.sanitize import safe_plain

HEADER_AGENT_LIMIT = 24
HEADER_HOST_LIMIT = 24


def risk_content(hints: tuple[RiskHint, ...]) -> Content:
    """The risk badge: labelled a hint, because it never decides anything."""
    parts = [Content.styled(f" {h.label} ", "reverse bold") + Content(" ") + value_content(h.why, Clip(120))
             for h in hints]
    return Content.assemble(("Hint, not a decision: ", "bold"), Content("  ·  ").join(parts))


def header_content(ask: Ask, now: float, position: int, total: int) -> Content:
    """One line (its size never changes, so updating it every second costs no layout). The host has
    a slot of its own before the agent's name, so no name can imitate one (`deploy on prod-a`): a
    broker ask's courier host (checked against the broker's subject, sanitised) or `this host`."""
    origin = broker_origin(ask)
    host: list[tuple[str, str] | Content] = [(" · this host", DIM)] if origin is None else [
        (" · host ", DIM), value_content(origin.host, Clip(HEADER_HOST_LIMIT), "bold", note=False),
        (" (broker)", DIM)]
    return Content.assemble(
        (f"Ask {position}/{total}", "bold"),
        *host,
        (" · agent ", DIM),
        agent_content(ask.request.requester_agent_name, Clip(HEADER_AGENT_LIMIT), short=True, note=False),
        (" · waiting ", DIM),
        (duration(age_seconds(ask, now)), ""),
        (" · child gives up in ", DIM),
        (duration(ask.seconds_left(now)), "bold"),
    )


def batch_line(index: int | None, ask: Ask, clip: Clip) -> Content:
    """One ask (of a batch): agent, surface and every value, exactly as the child sent them."""
    intent = ask.parsed.access_intent
    surface = intent.surface if intent is not None else (ask.request.surface or "?")
    values = list(intent.match_values) if intent is not None else [ask.request.value or ""]
    head = Content.assemble(
        (f"{index:>3}. " if index is not None else "", DIM),
        agent_content(ask.request.requester_agent_name, clip, short=True),
        ("  ", ""),
        value_content(surface, clip, "bold"),
        ("" if ask.has_facts else "  (no facts: the child's display text)", DIM),
    )
    indent = "       " if index is not None else "  "
    rows = [head, *(Content.assemble((indent, ""), value_content(v, clip)) for v in values)]
    return Content("\n").join(rows)


def env_block(session_id: str, root: Path | None = None, indent: str = "") -> str:
    """`core.disk.paths.env_line` as a shell command over lines, one variable a line (`\\` goes on):
    a narrow terminal never wraps it inside the session id, and the lines pasted run as the one line.
    Each variable is sanitised on its own line (a session id is another process's claim)."""
    env = forwarding_env(session_id, root)
    pairs = [safe_plain(f"{key}={shlex.quote(value)}") for key, value in env.items()]
    return f" \\\n{indent}".join(pairs)


def serving_content(sessions: Sequence[str], root: Path | None) -> Content:
    """The empty queue: what this authorizer serves, and the line a child needs to forward here."""
    if not sessions:
        return Content.styled("Serving no session: no child's ask can arrive.", WARN)
    first = safe_plain(sessions[0])
    more = f"  (and {len(sessions) - 1} more: S lists them)" if len(sessions) > 1 else ""
    parts: list[tuple[str, str] | Content] = [("Serving session  ", DIM), (first, "bold"), (more, DIM)]
    if root is not None:
        parts += [("\nForwarding root  ", DIM), (safe_plain(str(root)), "")]
        if agent_dir_of(root) is None:
            parts.append((f"\n⚠ no pi child writes here: children write under <agentDir>/{ROOT_IN_AGENT_DIR}",
                          WARN))
    parts += [
        ("\n\nA child forwards its asks here when started with:\n  ", DIM),
        (env_block(sessions[0], root, indent="  "), "bold"),
        ("\n(S: every inbox under the root, and adopting one)",
         DIM),
    ]
    return Content.assemble(*parts)
