"""Serving: the one route every ask goes down, and the inbox on disk as its first door.

`route` owns each ask from arrival to delivery (`records`: the lifecycle's rules): judged
(`judgment`), escalated, shown to the arbiter (`core.vocabulary.asks`), decided and delivered
through its `door` (read, deliver, acknowledge). The inbox's door: `ServingCore` (`loop`) wires the
stages once and runs the loop; `drain` diffs each inbox listing against the session's records and
reads new files in batches (`intake`); `pipeline` takes each file, checks it, restores what an earlier
run left (`reconcile`) and hands it to the route; the `publisher` records and answers (its records:
`verdicts`); a file that cannot be served goes to the `quarantine`. The broker's door is
`core.courier.parcel_door` (one per parcel, taken by `core.courier.broker_inbox`). The sessions
served are `sessions`; what serving reports, `core.vocabulary.events`.
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
