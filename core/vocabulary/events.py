"""What serving reports about each request file: the events observers (the app, the history) receive,
and the request's part of every log line about it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

from core.forwarding.inbox import display_name
from core.text import log_safe
from core.vocabulary.asks import AskKey
from core.wire.principal import log_agents
from core.wire.request import ParsedRequest
from core.wire.response import ForwardedResponse

EventKind = Literal[
    "arrived",
    "answered",
    "withdrawn",
    "quarantined",
    "left",
    "answer_failed",
    "forged",
    "contested",
    "not_serving",
    "serving_again",
    "unsafe_folder",
]


class ServeEvent(NamedTuple):
    """What happened to one request file; observers (TUI, history) subscribe to these. (A named tuple:
    immutable as a frozen dataclass, made in half its time or less; a burst makes two per ask.)

    `contested`: another server wrote (or is writing) its own answer under this request's response
    name; whatever this node answered, the child may read the other's (`reason` says who).
    `unsafe_folder` is about a folder, not a file: `key.name` is the refused folder's path and
    `reason` says why it is not served (a link planted in the session tree, never followed).
    """

    kind: EventKind
    key: AskKey
    at: float
    parsed: ParsedRequest | None = None
    response: ForwardedResponse | None = None
    outcome: str | None = None
    reason: str | None = None
    raw: bytes | None = None


Observer = Callable[[ServeEvent], None]
RunObserver = Callable[[Sequence[ServeEvent]], None]
"""Told a run of events in one call, as its `Observer` would be told each in order (an intake's answers
decided at once: thousands in a burst, no call per event)."""


def label(key: AskKey, parsed: ParsedRequest | None) -> str:
    """The request's part of a log line: session, file and, once parsed, agents, surface and value."""
    return f"session={log_safe(key.session_id)} {asked(key, parsed)}"


def asked(key: AskKey, parsed: ParsedRequest | None, said: dict[tuple[str, ...], str] | None = None) -> str:
    """`label` without the session (a line of one session's answers names it once). `said`: the
    agents and surface parts already made for a batch's other asks (a burst's share a few)."""
    file = key.name
    # A plain ASCII name (every request id) is shown as it is: nothing for `display_name` or
    # `log_safe` to escape, and short enough not to be cut.
    plain = len(file) <= 120 and file.isascii() and file.isprintable() and "\\" not in file
    name = f"request={file if plain else log_safe(display_name(file))}"
    if parsed is None:
        return name
    req = parsed.request
    intent = parsed.access_intent
    surface = intent.surface if intent else (req.surface or "?")
    value = intent.match_values[0] if intent and intent.match_values else (req.value or "")
    if said is None:
        return f"{name} {log_agents(parsed)} surface={log_safe(surface, 40)} value={log_safe(value, 80)!s}"
    principal = intent.principal.agent_name if intent else req.requester_agent_name
    common = (req.requester_agent_name, principal, surface)
    if (part := said.get(common)) is None:
        part = said[common] = f"{log_agents(parsed)} surface={log_safe(surface, 40)}"
    return f"{name} {part} value={log_safe(value, 80)!s}"
