"""Serving: what takes a request file to its response file, exactly once.

`ServingCore` (`loop`) wires the stages once and runs the loop; `drain` diffs each inbox listing
against the session's records and reads new files in batches (`intake`); `pipeline` is the route of
one file and the one owner of its record (`records`: the lifecycle's rules): checked, restored
(`reconcile`), judged (`judgment`), shown to the arbiter (`core.vocabulary.asks`), answered by the
`publisher` (its records: `verdicts`); a file that cannot be served goes to the `quarantine`. The
sessions served are `sessions`; what serving reports, `core.vocabulary.events`.
"""

from core.serving.judgment import NO_FACTS_EXPLANATION, Chain, Judge, NoRecordedAuthority
from core.serving.loop import ServingCore
from core.serving.sessions import ServedSession, ServedSessions, Sessions
from core.vocabulary.events import EventKind, Observer, ServeEvent

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
