"""What serving reports about each request file: the events observers (the app, the history) receive."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from core.serving.asks import AskKey
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
    "not_serving",
    "serving_again",
    "unsafe_folder",
]


@dataclass(frozen=True)
class ServeEvent:
    """What happened to one request file; observers (TUI, history) subscribe to these.

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
