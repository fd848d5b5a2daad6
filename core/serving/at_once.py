"""Asks decided at once, judged in their intake's trip on the publisher's disk thread.

An ask that this node's rules decide (or its fail-safe arbiter, `--on-ask deny`) waits for nobody: the
trip that reads its file judges it there, and the publisher's next work on that thread records,
publishes and removes it with the others of its intake, through the publisher's very checkpoints
(`Publisher.settle`); the event loop is told once per intake (`Pipeline.settle_at_once`), and holds
their names meanwhile (`ServedSession.settling`) as a record holds one. Measured (issue 37, fourth
pass, `docs/design/serving-speed.md`): the route of one file on the loop, its records, its events and
its hand-off to the publisher cost a burst more CPU per ask than the floor server spends on the whole
ask.

Only an ask with nothing before it is taken: its file usable and addressed to this session, no response
and no recorded verdict for its id, its name held by no record. Every other file (unusable, restored
after a restart, an ask for a person, a chain or a courier, one whose judgment raised) goes down the
route on the loop as before (`core.serving.pipeline`), its read passed on untouched. What became of an
answer that was not plainly written (a response found first, a full disk, a request withdrawn at the
disk) is reported by the route's own code, from a record made for it then.

Judgment here runs off the event loop: `RecordedAuthority.judge` is safe to call from two threads
(`core.judging.recorded`); the arbiter's `decide_at_once` and `judge_ask` build values only. A config
reload or a session grant taken on the loop while a trip judges is as if it came a moment later (as for
a batch judged on the loop and still committing).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field, replace

from core.clock import Clock
from core.disk.paths import SAFE_REQUEST_ID
from core.forwarding.inbox import SessionInbox
from core.rules.compiled import Decided
from core.serving.intake import FileRead, Intake
from core.serving.judgment import Judge, VerdictOf, decide_ask, verdict_decision
from core.serving.verdicts import VerdictRecord
from core.vocabulary.asks import ArbiterDecision, Ask, AskKey, Decision, Judgment, by_person
from core.wire.limits import MAX_MATCH_VALUES, MAX_VALUE_CHARS
from core.wire.request import ForwardedAccessIntent, ParsedRequest
from core.wire.response import ForwardedResponse, encode_response


@dataclass(frozen=True)
class AtOnce:
    """What a trip needs to judge the asks of one session decided at once, taken on the event loop."""

    session_id: str
    judge: Judge
    clock: Clock
    timeout_ms: int
    #: The arbiter's decision on the spot (`DecidesAtOnce`), when no chain comes before it; else None:
    #: an ask no rule decides goes down the route.
    arbiter: Callable[[Ask], ArbiterDecision] | None
    #: The names held by a record of the session (its `AskRecords`), and those being settled, looked
    #: up as the trip goes: never taken here, whatever the file under the name now holds.
    held: tuple[Container[str], Container[str]] = (frozenset(), frozenset())
    #: The judge's verdict alone, when it can say one (`RecordedAuthority.verdict_of`): an ask a rule
    #: decides is then judged without the judgment the lane would drop (`judgment.decide_ask`).
    verdict_of: VerdictOf | None = field(init=False, default=None)
    #: The arbiter's decision of any ask of a responder, when it reads nothing else of an ask (the
    #: fail-safe's, leave's `decide_unasked`): an ask no rule decides then makes no `Ask`.
    unasked: Callable[[str], ArbiterDecision] | None = field(init=False, default=None)
    #: The judge's `Decided` of a plain ask the compiled reading decides, when it can say one
    #: (`RecordedAuthority.decided_plain`): the usual ask is judged in one call.
    plain: Callable[[ForwardedAccessIntent, str], Decided | None] | None = field(init=False, default=None)
    #: Whether an ask without facts of an agent is asked, told in one call, when the judge can say
    #: (`RecordedAuthority.asked_without_facts`): the fail-safe's ask then takes no judgment.
    facts_none: Callable[[str], bool] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict_of", getattr(self.judge, "verdict_of", None))
        object.__setattr__(self, "plain", getattr(self.judge, "decided_plain", None))
        object.__setattr__(self, "facts_none", getattr(self.judge, "asked_without_facts", None))
        owner = getattr(self.arbiter, "__self__", None)
        if owner is not None and getattr(owner, "decide_at_once", None) == self.arbiter:
            object.__setattr__(self, "unasked", getattr(owner, "decide_unasked", None))

    def serve(self, inbox: SessionInbox, intake: Intake) -> Intake:
        """Judge the asks of `intake` decided at once; the intake with their verdicts apart
        (`Intake.at_once`), its `reads` the others."""
        now = self.clock.wall()
        verdicts: list[VerdictRecord] = []
        last: tuple[ForwardedResponse, bytes] | None = None  # answers share responses (`rule_response`)
        rest: list[tuple[str, FileRead]] = []
        judged: dict[str, Judgment | Exception] = {}
        session_id, recorded, responses = self.session_id, intake.recorded, intake.responses
        records, settling = self.held
        plain, wall, unasked, facts_none = self.plain, self.clock.wall, self.unasked, self.facts_none
        # The last `Decided` of the compiled reading and the decision made of it (of its millisecond).
        alike: Decided | None = None
        shared: Decision | None = None
        for name, read in intake.reads:
            parsed = read.parsed
            decision: Decision | Judgment | Exception
            try:
                if parsed is None or name in records or name in settling or name in responses:
                    rest.append((name, read))
                    continue
                # `rejection(name, read, session_id) is not None` (the route says why), in place.
                request = parsed.request
                stem = name.removesuffix(".json")
                if (request.id != stem or stem in recorded or request.target_session_id.strip() != session_id
                        or _safe_id(stem) is None or stem in _DOTS):  # `is_safe_request_id`, in place
                    rest.append((name, read))
                    continue
                key = _new_tuple(AskKey, (session_id, name))  # `AskKey(session_id, name)`, made in C
                # `self.decide(key, read, now)` of the usual ask, in place (`decided_plain`): a plain ask
                # within the limits (`over_limit` says None of it: few values, and all of them together
                # within one value's limit) that the compiled reading decides. Its decision is shared by
                # the asks decided alike within one millisecond, as `verdict_decision` shares it.
                intent = request.access_intent
                decided: Decided | Decision | None = None
                if (plain is not None and intent is not None and not intent.asking_units
                        and len(values := intent.match_values) <= MAX_MATCH_VALUES
                        and sum(map(len, values)) + len(intent.boundary_value or "") <= MAX_VALUE_CHARS):
                    decided = plain(intent, session_id)
                elif (intent is None and unasked is not None and facts_none is not None
                      and facts_none(request.requester_agent_name)):
                    # No facts: asked (the fail-safe's case); the arbiter's decision on the spot, as
                    # `self.decide` takes it, else the route's judgment (`self.decide` again).
                    taken = unasked(session_id)
                    if isinstance(taken, Decision) and taken.reply is None and not by_person(taken.outcome):
                        decided = taken
                if decided is None:
                    decision = self.decide(key, read, now)
                elif isinstance(decided, Decision):
                    decision = decided
                elif (shared is not None and decided is alike
                      and int(wall() * 1000) == shared.response.responded_at):  # `wall_ms`: the ask's own
                    decision = shared
                else:
                    alike = decided
                    decision = shared = verdict_decision(decided.verdict, decided.decision, decided.reason,
                                                         session_id, self.clock)
                if isinstance(decision, Decision):
                    response = decision.response
                    if last is None or last[0] is not response:
                        last = (response, encode_response(response))
                    # `VerdictRecord(key, parsed, response, body, ...)`, made in C.
                    made = (key, parsed, response, last[1], decision.outcome, decision.carried_to, now,
                            read.raw)
                    verdicts.append(_new_tuple(VerdictRecord, made))
                    continue
            except Exception as exc:  # one file's failure is its own: the route quarantines it with why
                decision = exc
            rest.append((name, read))
            judged[name] = decision
        if not verdicts and not judged:
            return intake
        return replace(intake, reads=rest, at_once=verdicts, judged=judged)

    def decide(self, key: AskKey, read: FileRead, now: float) -> Decision | Judgment:
        """The decision no one waits on for this ask (a rule's, the fail-safe's), or the judgment of
        an ask it is not (for a person, a chain, a courier, or left)."""
        parsed = read.parsed
        assert parsed is not None
        judgment = decide_ask(self.judge, self.verdict_of, parsed, self.session_id, self.clock)
        if isinstance(judgment, Decision):
            return judgment
        if self.arbiter is None:
            return judgment
        if self.unasked is not None:
            taken = self.unasked(self.session_id)
        else:
            taken = self.arbiter(new_ask(key, parsed, judgment, now, self.timeout_ms, self.session_id))
        if isinstance(taken, Decision) and taken.reply is None and not by_person(taken.outcome):
            return taken
        return judgment


def new_ask(key: AskKey, parsed: ParsedRequest, judgment: Judgment, arrived_at: float, timeout_ms: int,
            responder: str) -> Ask:
    """`Ask(key, parsed, judgment, arrived_at, timeout_ms, responder)`, built without the frozen
    dataclass's `object.__setattr__` per field: every ask no rule decides makes one for the fail-safe
    arbiter. The same value (`tests/core/test_at_once_values.py` checks every field is written)."""
    ask = _new_object(Ask)
    ask.__dict__.update(key=key, parsed=parsed, judgment=judgment, arrived_at=arrived_at,
                        timeout_ms=timeout_ms, responder_session_id=responder)
    return ask


_new_object = object.__new__
_new_tuple = tuple.__new__
_safe_id = SAFE_REQUEST_ID.fullmatch
#: The two names `is_safe_request_id` refuses that its pattern takes.
_DOTS = frozenset({".", ".."})
