"""Serving: the pipeline that takes a request file to its response file (see `core.serving.loop`)."""

from core.serving.events import EventKind, Observer, ServeEvent
from core.serving.judgment import NO_FACTS_EXPLANATION, Chain, Judge, NoRecordedAuthority
from core.serving.loop import ServingCore
from core.serving.sessions import ServedSession, ServedSessions, Sessions

__all__ = [
    "NO_FACTS_EXPLANATION",
    "Chain",
    "EventKind",
    "Judge",
    "NoRecordedAuthority",
    "Observer",
    "ServeEvent",
    "ServedSession",
    "ServedSessions",
    "ServingCore",
    "Sessions",
]
