"""One state record per request file of a served session, and the rules of its lifecycle.

A record is taken when intake finds a new file and ends when the name is free again. Its states:

    taken ─→ arrived ─→ judged ─→ shown ─→ decided ─→ published ─→ released
      │         │          │         │ ↑       │ │
      │         │          │         │ └───────┘ │  a person's decision that could not be written waits again
      │         │          │         │           └─→ unanswered  (any other decision not written: the next
      │         │          │         │                rescan serves the file anew, or finds it withdrawn)
      │         │          │         └─→ left
      │         │          └─→ decided   (a chain link decided)
      │         └─→ decided              (this node's rules decided)
      └─→ decided / published            (answered by an earlier run: republished, or already visible)

A live record can be set aside (`held`: quarantine failed, the file is left in place and ignored;
not once `left`) or `released` (the name is free: gone, quarantined, or to be served again). A file
that vanishes before any decision was taken, or while its decision could not be written (`unanswered`),
is `withdrawn` (the child gave up without an answer); one that vanishes while its answer is being
published keeps its name until the publisher reports (`withdrawn` if nothing was written). `withdrawn` and
`released` are final: a final record is out of the session's table, and no transition leaves it, so
an ask the child withdrew is never answered and none is published twice. A transition not in `NEXT`
raises `IllegalTransition`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

from core.forwarding.inbox import FileIdentity
from core.serving.verdicts import Published
from core.vocabulary.asks import AskKey
from core.wire.request import ParsedRequest

State = Literal[
    "taken", "arrived", "judged", "shown", "left", "decided", "published", "unanswered", "held", "withdrawn",
    "released",
]

NEXT: Final[dict[State, frozenset[State]]] = {
    "taken": frozenset({"arrived", "decided", "published", "unanswered", "held", "withdrawn", "released"}),
    "arrived": frozenset({"judged", "decided", "held", "withdrawn", "released"}),
    "judged": frozenset({"shown", "decided", "held", "withdrawn", "released"}),
    "shown": frozenset({"left", "decided", "held", "withdrawn", "released"}),
    "left": frozenset({"withdrawn", "released"}),
    "decided": frozenset({"published", "shown", "unanswered", "held", "withdrawn", "released"}),
    "published": frozenset({"held", "released"}),
    "unanswered": frozenset({"held", "withdrawn", "released"}),
    "held": frozenset({"released"}),
    "withdrawn": frozenset(),
    "released": frozenset(),
}
#: A file that vanishes in one of these states was withdrawn by its child: no decision was taken yet.
UNDECIDED: Final = frozenset({"taken", "arrived", "judged", "shown", "left"})
#: A file that vanishes in one of these states was withdrawn by its child unanswered.
UNANSWERED: Final = UNDECIDED | {"unanswered"}
#: States of an ask awaiting this node's decision: it writes no response then, so one appearing is forged.
AWAITING: Final = frozenset({"arrived", "judged", "shown"})
#: States a record may be released from (`release`).
RELEASABLE: Final = frozenset(state for state, after in NEXT.items() if "released" in after)


class IllegalTransition(Exception):
    """A change of state the lifecycle does not allow (a bug, never a child's doing)."""


@dataclass(slots=True, eq=False)
class AskRecord:
    """What serving knows of one ask (a request file, or a broker's parcel): its state, the request once
    it arrived, its answer once published. Changed only through `AskRecords`, which refuses a change its
    lifecycle does not allow; when to change it is decided by the route (`core.serving.route`) from
    arrival to delivery, and by the ask's door (`core.serving.door`) before and after."""

    key: AskKey
    state: State = "taken"
    parsed: ParsedRequest | None = None
    arrived_at: float = 0.0
    published: Published | None = None
    #: Its file vanished while its answer was being published.
    vanished: bool = False
    #: The file it was read from (inode, size, mtime): another file under its name is another ask.
    identity: FileIdentity | None = None

    @property
    def live(self) -> bool:
        return self.state != "withdrawn" and self.state != "released"


class AskRecords:
    """The live records of one served session (or one broker origin), by request file name (parcel id)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._live: dict[str, AskRecord] = {}
        #: Counts every change of a record (taken, moved, vanished): a rescan that finds it as it left
        #: it reuses what it derived from the records then (`core.serving.drain`).
        self.changes = 0
        self._awaiting: tuple[int, dict[str, AskRecord]] = (-1, {})

    def __contains__(self, name: object) -> bool:
        return name in self._live

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[AskRecord]:
        return iter(list(self._live.values()))

    def names(self) -> frozenset[str]:
        return frozenset(self._live)

    def held(self, names: Iterable[str]) -> set[str]:
        """Of `names`, those with a record (without a call per name: a burst's removals are looked up)."""
        return self._live.keys() & names

    def get(self, name: str) -> AskRecord | None:
        return self._live.get(name)

    def take(self, name: str) -> AskRecord:
        """A new file: its record, `taken`. A name already tracked is refused."""
        if name in self._live:
            raise IllegalTransition(f"{name!r} is already tracked")
        self.changes += 1
        record = self._live[name] = AskRecord(AskKey(self.session_id, name))
        return record

    def arrive(self, record: AskRecord, parsed: ParsedRequest, at: float) -> None:
        """A valid request: it is an ask now, to be judged. (`move`'s checks inline: every ask of a
        burst passes here, as through `publish` and `release`.)"""
        if record.state != "taken" or self._live.get(record.key.name) is not record:
            self.move(record, "arrived")  # refused, saying why
        self.changes += 1
        record.state, record.parsed, record.arrived_at = "arrived", parsed, at

    def publish(self, record: AskRecord, published: Published) -> None:
        """Its response is visible; the request is being removed (by the answer `published`)."""
        if record.state != "decided" or self._live.get(record.key.name) is not record:
            self.move(record, "published")  # refused, saying why
        self.changes += 1
        record.state, record.published = "published", published

    def vanish(self, name: str) -> AskRecord | None:
        """The file is gone: the record ends `withdrawn` when no answer was written (none taken, or one
        that could not be written), else `released`. A record whose answer is being published
        (`decided`) keeps its name until the publisher says what became of it: a file back under that
        name meanwhile (a folder moved away and back) is not judged and answered a second time."""
        record = self._live.get(name)
        self.changes += 1
        if record is not None and record.state == "decided":
            record.vanished = True  # if its answer cannot be written, the child gave up unanswered
        elif record is not None:
            self.move(record, "withdrawn" if record.state in UNANSWERED else "released")
        return record

    def awaiting(self) -> dict[str, AskRecord]:
        """The records awaiting this node's decision, by name: the same dict until a record changes
        (a rescan of a quiet queue of thousands walks none of them)."""
        at, found = self._awaiting
        if at != self.changes:
            found = {name: record for name, record in self._live.items() if record.state in AWAITING}
            self._awaiting = (self.changes, found)
        return found

    def unanswered(self) -> frozenset[str]:
        """The names whose decision could not be written: the next rescan reads them anew."""
        return frozenset(name for name, record in self._live.items() if record.state == "unanswered")

    def release(self, record: AskRecord) -> None:
        """The name is free again; a record already ended stays as it ended."""
        name = record.key.name
        if record.state in RELEASABLE and self._live.get(name) is record:
            self.changes += 1
            record.state = "released"
            del self._live[name]
        elif record.live:
            self.move(record, "released")  # refused, saying why

    def advance(self, record: AskRecord, state: State) -> bool:
        """`move` a record that is still live; one that ended meanwhile (its file vanished while serving
        waited on the disk) stays as it ended."""
        if not record.live:
            return False
        self.move(record, state)
        return True

    def move(self, record: AskRecord, state: State) -> None:
        name = record.key.name
        if state not in NEXT[record.state]:
            raise IllegalTransition(f"{name!r}: {record.state} → {state}")
        if self._live.get(name) is not record:
            raise IllegalTransition(f"{name!r}: not a record of this table")
        self.changes += 1
        record.state = state
        if state == "withdrawn" or state == "released":  # final: out of the table
            del self._live[name]
