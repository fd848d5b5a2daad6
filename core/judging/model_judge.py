"""The model judge as a chain link: the model answers the questions, the table maps the answers, and
code caps what the verdict may do here (`docs/judge.md`).

Caps, whatever the model says: never `allow` on a path surface (`links.allow_is_capped`: the path and
external_directory families, their directional members, the path tools, an empty surface), nor at a
relaying node, nor on a surface the person did not opt into (`allow_surfaces`); facts shortened to fit
never allow. A request without facts never reaches the judge. In `advise` mode it decides nothing. A
deny where a person attends is not final: it goes to the person with the judge's answers (`advice`);
headless (`serve`), it is final, with the reason the agent reads. Every review (answered, failed,
skipped by the breaker) is recorded with its latency.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from core.clock import SYSTEM_CLOCK, Clock
from core.judging.judge_breaker import Breaker
from core.judging.judge_client import JudgeFailure, ModelClient, before
from core.judging.judge_questions import (
    DEFAULT_MAPPING,
    JudgeVerdict,
    MappingRow,
    decide,
    judge_facts,
    parse_answers,
    user_prompt,
)
from core.judging.links import allow_is_capped
from core.judging.recorded import LinkChain
from core.text import log_safe
from core.vocabulary.asks import Judgment
from core.wire.decisions import AuthorizerDecision
from core.wire.facts import IntentFacts
from core.wire.request import ParsedRequest

log = logging.getLogger("pi_authorizer.judge")

JUDGE_NAME = "judge"
JudgeMode = Literal["decide", "advise"]
#: What became of a review: it decided; the table deferred; its deny went to the person; advice only;
#: its allow was capped; the model failed; the breaker skipped it.
Routed = Literal["decided", "deferred", "to_person", "advice", "capped", "failed", "unavailable"]


@dataclass(frozen=True)
class JudgePolicy:
    """What the judge may do on this node (the person's settings, never a child's)."""

    mode: JudgeMode = "decide"
    allow_surfaces: frozenset[str] = frozenset()
    mapping: tuple[MappingRow, ...] = DEFAULT_MAPPING
    timeout_s: float = 5.0
    #: A person attends (the app): a deny goes to the person instead of deciding.
    attended: bool = False
    #: This node carries its undecided asks to another: the judge may deny or defer, never allow.
    relaying: bool = False
    #: Calls in flight at once: a burst of asks waits for a slot (within the same timeout) instead of
    #: flooding a local model; a wait that runs out is "busy", not a failure of the judge.
    concurrency: int = 4


@dataclass(frozen=True)
class JudgeReview:
    """One review: what the model answered (`answers`, its `model_reason`: untrusted text), what the
    table made of it (`recommendation`, `why`: this node's words) and what the chain does (`verdict`)."""

    surface: str
    value: str
    mode: JudgeMode
    recommendation: JudgeVerdict
    verdict: JudgeVerdict
    routed: Routed
    why: str
    answers: dict[str, Any] | None = None
    model_reason: str | None = None
    failure: str | None = None
    latency_ms: float | None = None
    at: float = 0.0
    request_id: str | None = None
    served_session: str | None = None

    @property
    def answered(self) -> bool:
        return self.answers is not None

    def agent_reason(self) -> str:
        """What the agent reads when this review denies (headless): this node's rule, then the
        model's reason, marked as the model's."""
        said = f"; the model said: {log_safe(self.model_reason, 300)}" if self.model_reason else ""
        return f"pi-authorizer's model judge denied this ({self.why}){said}"


class ModelJudge:
    """Asks the model (through the breaker), maps its answers, and caps the verdict."""

    def __init__(self, client: ModelClient, policy: JudgePolicy, breaker: Breaker | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.client, self.policy, self.clock = client, policy, clock
        self.breaker = breaker or Breaker(clock=clock)
        self._slots = asyncio.Semaphore(max(1, policy.concurrency))

    async def review(self, facts: IntentFacts) -> JudgeReview:
        given = judge_facts(facts)
        value = facts.match_values[0] if facts.match_values else ""
        base = JudgeReview(facts.surface, value, self.policy.mode, "defer", "defer", "failed", "",
                           at=self.clock.wall())
        if not self.breaker.admit():
            why = f"the judge is unavailable ({self.breaker.why or 'failing'}): not asked"
            return replace(base, routed="unavailable", why=why, failure=why)
        started = self.clock.monotonic()
        reached = False

        async def call(prompt: str) -> str:
            nonlocal reached
            async with self._slots:
                reached = True
                return await self.client.ask(prompt)

        try:
            text = await before(call(user_prompt(given)), self.policy.timeout_s, self.clock)
            answers = parse_answers(text)
        except asyncio.CancelledError:
            self.breaker.abandoned()
            raise
        except TimeoutError:
            if not reached:  # never asked: the judge was busy with earlier asks, not failing
                self.breaker.abandoned()
                policy = self.policy
                why = f"busy: {policy.concurrency} earlier reviews took the whole {policy.timeout_s:g}s"
                log.warning("model judge: %s; it defers", why)
                return replace(base, why=why, failure=why)
            return self._failed(base, started, f"no answer within {self.policy.timeout_s:g}s")
        except (JudgeFailure, ValueError) as exc:
            return self._failed(base, started, str(exc))
        except Exception as exc:
            return self._failed(base, started, f"the judge failed: {type(exc).__name__}")
        self.breaker.succeeded()
        latency = (self.clock.monotonic() - started) * 1000
        mapped = decide(answers, self.policy.mapping, given.shortened)
        verdict, routed, why = self._capped(facts.surface, mapped.verdict, mapped.why)
        return replace(base, recommendation=mapped.verdict, verdict=verdict, routed=routed, why=why,
                       answers={q: a for q, a in answers.as_json().items() if q != "reason"},
                       model_reason=answers.reason, latency_ms=latency)

    def _failed(self, base: JudgeReview, started: float, why: str) -> JudgeReview:
        self.breaker.failed(why)
        latency = (self.clock.monotonic() - started) * 1000
        log.warning("model judge: %s; it defers", log_safe(why, 300))
        return replace(base, why=why, failure=why, latency_ms=latency)

    def _capped(self, surface: str, verdict: JudgeVerdict, why: str) -> tuple[JudgeVerdict, Routed, str]:
        """What the table's verdict may do here (see the module docstring)."""
        policy = self.policy
        if verdict == "allow":
            cap = None
            if allow_is_capped(surface):
                cap = "the judge never allows on a path surface"
            elif policy.relaying:
                cap = "this node relays its asks: only the node that decides them may allow"
            elif surface not in policy.allow_surfaces:
                cap = f"allow on {surface!r} is not opted into (--judge-allow-surfaces)"
            if cap is not None:
                return "defer", "capped", f"{why}; capped: {cap}"
        if policy.mode == "advise":
            return "defer", "advice", why
        if verdict == "deny" and policy.attended:
            return "defer", "to_person", why
        return verdict, ("decided" if verdict != "defer" else "deferred"), why


class AdviceBook:
    """The latest review of each ask still in memory, for the person's queue: keyed by the very
    request object judged (never a look-alike), bounded."""

    SIZE = 4096

    def __init__(self) -> None:
        self._reviews: OrderedDict[int, tuple[ParsedRequest, JudgeReview]] = OrderedDict()

    def put(self, parsed: ParsedRequest, review: JudgeReview) -> None:
        self._reviews[id(parsed)] = (parsed, review)
        self._reviews.move_to_end(id(parsed))
        while len(self._reviews) > self.SIZE:
            self._reviews.popitem(last=False)

    def get(self, parsed: ParsedRequest) -> JudgeReview | None:
        held = self._reviews.get(id(parsed))
        return held[1] if held is not None and held[0] is parsed else None


class JudgeChain:
    """The serving core's `Chain`: the `--link` links first, then the model judge on the child's facts."""

    def __init__(self, judge: ModelJudge, links: LinkChain | None = None,
                 record: Callable[[JudgeReview], None] | None = None,
                 record_path: Path | None = None) -> None:
        """`record`: where each review is written (a worker thread calls it); `record_path`: the
        file it is in, for the measures (`core.judging.judge_record.measure`)."""
        self.model, self.links, self.record, self.record_path = judge, links, record, record_path
        self.advice = AdviceBook()

    async def review(self, parsed: ParsedRequest) -> Judgment | None:
        if self.links is not None:
            decided = await self.links.review(parsed)
            if decided is not None:
                return decided
        facts = parsed.facts
        if facts is None:
            return None  # no facts, no judgment: straight to the person
        review = await self.model.review(facts)
        review = _placed(review, parsed)
        self.advice.put(parsed, review)
        if review.failure is None:
            log.info("model judge on %s %s: %s (%s; %s) in %.0fms", log_safe(review.surface, 40),
                     log_safe(review.value, 120), review.recommendation, review.routed,
                     log_safe(review.why, 200), review.latency_ms or 0.0)
        if self.record is not None:
            try:
                await asyncio.to_thread(self.record, review)
            except Exception:
                log.exception("model judge: its review could not be recorded")
        if review.verdict == "defer":
            return None
        reason = review.agent_reason() if review.verdict == "deny" else None
        source = AuthorizerDecision(name=JUDGE_NAME, verdict=review.verdict, reason=reason)
        return Judgment(verdict=review.verdict, decided_by=source, reason=reason,
                        explanation=(f"the model judge said {review.verdict}: {review.why}",))

    async def close(self) -> None:
        await self.model.client.close()


def _placed(review: JudgeReview, parsed: ParsedRequest) -> JudgeReview:
    request = parsed.request
    return replace(review, request_id=request.id, served_session=request.target_session_id)
