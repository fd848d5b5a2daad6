"""Recorded authority and the chain, as the serving core sees them.

Adapts `core.rules` (this node's own config, scoped to the child's `principal.agentName`, matched
on the child's facts as sent) and `core.judging.links` (non-terminal links) to the serving core's
`Judge`/`Chain` seams, and keeps this node's serving-session grants. A request without usable facts
never reaches either: missing facts make judgment impossible, so it goes to a person
(`docs/design/contract.md` § Facts and judgment).

Thread-safe: `judge` (and so `judge_ask`) runs on the publisher's disk thread for the asks decided at
once while the event loop judges others, reloads the config and records or revokes grants. The
judgment itself reads values replaced whole (a `Policy` from the store, which locks itself; a
session's grant rules, one tuple): a judgment made while a reload or a grant lands is the judgment
of the state before or after it, never a mix inside one reading. What is shared and mutated takes a
lock of its own, held for a few dictionary operations only: the grant books by session (`_lock`,
taken only when a session's book is first made), the config errors already logged (`_lock`, only
when the policy has errors), a grant's use count (`GrantLog`'s lock, only when a grant decided), a
book's grants (`SessionGrants`' lock) and the kept judgments (`KeptJudgments`' lock, when one is
kept). The last policy and compiled reading used are one value each, read and replaced whole. An
ask no grant decides, under a config without errors, takes no lock of the judging layer.
(`tests/judging/test_threads.py` judges from two threads during a reload and a grant.)
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from core.clock import SYSTEM_CLOCK, Clock
from core.forwarding.inotify import FolderWatch
from core.judging.grant_log import GrantEntry, GrantLog
from core.judging.kept import KeptJudgments
from core.judging.links import AuthorizerChain
from core.rules import ConfigError, Policy, PolicyStore, Rule, SessionGrants
from core.rules.compiled import Compiled, Decided
from core.rules.explain import Explanation, explain, explain_policy
from core.rules.model import Step
from core.rules.reloads import PendingReload
from core.rules.session_grants import grant_rules
from core.serving import NO_FACTS_EXPLANATION
from core.text import log_safe
from core.vocabulary.asks import Judgment, LazySequence
from core.wire.decisions import AuthorizerDecision, SessionApprovalDecision
from core.wire.request import ForwardedAccessIntent, ParsedRequest, SessionGrant

log = logging.getLogger("pi_authorizer.rules")

CONFIG_RECHECK_S = 2.0


class RecordedAuthority:
    """This node's rules plus its serving-session grants (one grant book per served session)."""

    def __init__(self, store: PolicyStore, clock: Clock = SYSTEM_CLOCK) -> None:
        """`clock`: when each serving-session grant was made (the grants screen shows it)."""
        self.store = store
        self.clock = clock
        self._grants: dict[str, SessionGrants] = {}
        self._reported: set[str] = set()
        #: Guards `_grants` (a book made once per session) and `_reported`, from any thread.
        self._lock = threading.Lock()
        self._ignored_reported = ""
        #: Called with each config change held because it widens (the app shows it and asks).
        self.on_pending: list[Callable[[PendingReload], None]] = []
        store.subscribe(self._held)
        self.grant_log = GrantLog()
        self._kept = KeptJudgments()
        self._kept_generation = store.generation
        #: (agent, store generation, compositions, the policy `store.policy(agent)` returned then):
        #: one tuple, read and replaced whole from any thread.
        self._last_policy: tuple[str, int, int, Policy] | None = None
        self._last_compiled: Compiled | None = None
        #: `Compiled.decide` of the asks of one value `decided_plain` judged, by (surface, value, floor),
        #: with the reading that decided (the cache of identical facts: a burst of one command). Each
        #: entry is used only under that very reading, and all are dropped when the files change.
        self._alike: dict[tuple[str, str, str | None], tuple[Compiled, Decided | None]] = {}
        for pending in store.held_at_start():
            log.warning(
                "at start: config change to %s since it was last accepted widens permissions and is NOT "
                "applied (review it in the app, or start serve with --accept-widening-reloads): %s",
                log_safe(pending.path, 300), log_safe("; ".join(pending.diff_lines()), 2000))

    def grants_for(self, session_id: str) -> SessionGrants:
        """The session's grant book, made on first use (once, whichever thread asks first)."""
        book = self._grants.get(session_id)
        if book is None:
            with self._lock:
                book = self._grants.get(session_id)
                if book is None:
                    book = self._grants[session_id] = SessionGrants(self.store, self.clock)
        return book

    def explain(
        self, parsed: ParsedRequest, session_id: str, extra: Sequence[SessionGrant] = (),
        written: tuple[Path, str] | None = None,
    ) -> Explanation:
        """`extra`: grants judged as if recorded after this session's own (a grant's preview);
        `written`: a config file's text judged as if written into it (a rule's preview)."""
        rules = self.grants_for(session_id).rules() + tuple(
            rule for g in extra for rule in grant_rules(g.surface, g.pattern, self.store.home)
        )
        store = self.store if written is None else self.store.as_if_written(*written)
        return explain(store, parsed.facts, parsed.agent_name, rules)

    def judge(
        self, parsed: ParsedRequest, session_id: str, extra: Sequence[SessionGrant] = (),
        preview: bool = False, written: tuple[Path, str] | None = None,
    ) -> Judgment:
        """One judgment; the explanation is `LazySequence` until someone reads it. An ask judged
        before under the same policy and grants gets the judgment kept then (`core.judging.kept`).
        Callable from any thread (the module's docstring says how).

        `preview`: a what-if (a grant's or a rule's reach), not a decision: no grant's use is counted."""
        if extra or written is not None:
            return self.judge_afresh(parsed, session_id, extra, preview, written)
        judgment = self._judge(parsed, session_id, preview, False)
        assert isinstance(judgment, Judgment)  # (asked for whole)
        return judgment

    def verdict_of(self, parsed: ParsedRequest, session_id: str) -> Judgment | Decided:
        """`judge`, for a caller that reads only the verdict, `decidedBy`, reason and grant of an ask
        a rule decides (the at-once lane, which drops the rest): such an ask the compiled reading
        decides, judged once so far, is given as that reading's `Decided` (shared by the asks one rule
        decides alike), without the `Judgment`, its full judgment and its two lazy sequences (~1.7 µs
        of the ~6 a new ask costs). Everything else is `judge`'s, and so are a grant's use, the kept
        judgments and the logged config errors (`tests/judging/test_verdict_of.py`)."""
        return self._judge(parsed, session_id, False, True)

    def decided_plain(self, intent: ForwardedAccessIntent, session_id: str) -> Decided | None:
        """`verdict_of`'s `Decided` of a plain ask (facts within the limits, no asking units) that the
        compiled reading last used for this agent and session decides (allow or deny), in one call: the
        at-once lane's usual ask (`core.serving.at_once`). None when only `verdict_of` can tell (an ask,
        a reading not built yet, another agent's or session's last): the caller then asks it.

        The very values `verdict_of` reads: the session's grant rules before the policy (as `_judge`),
        the policy `store.policy(agent)` returned last for this generation and composition, and the
        compiled reading of that policy and those rules (identity, never equality): a reload or a grant
        added or revoked since makes another value, so it is never missed. A kept judgment is not
        looked at: the compiled reading decides as the whole judgment does (`tests/rules/test_compiled.py`),
        and so as one kept. A grant's use is counted and a config error logged as `_judge` does
        (`tests/judging/test_decided_plain.py`)."""
        book = self._grants.get(session_id)
        if book is None:
            return None
        rules = book.rules()
        store = self.store
        last, compiled = self._last_policy, self._last_compiled
        if (last is None or compiled is None or last[0] != intent.principal.agent_name
                or last[1] != store.generation or last[2] != store.composed):
            return None
        policy = last[3]
        if compiled.policy is not policy or compiled.session is not rules:
            return None
        values = intent.match_values
        if len(values) == 1 and (len(values[0]) + len(intent.surface) + len(intent.floor or "")
                                 <= MAX_ALIKE_CHARS):
            # An ask of one value (a command, a path): decided as the last ask of the same facts was,
            # if under this very reading (`decide` is a function of them alone under one `Compiled`).
            alike = self._alike
            key = (intent.surface, values[0], intent.floor)
            found = alike.get(key)
            if found is not None and found[0] is compiled:
                decided = found[1]
            else:
                decided = compiled.decide(intent.surface, values, intent.floor)
                if len(alike) >= MAX_ALIKE:
                    alike.clear()
                alike[key] = (compiled, decided)
        else:
            decided = compiled.decide(intent.surface, values, intent.floor)
        if decided is None or decided.verdict == "ask":
            return None
        if decided.grant is not None:
            self.grant_log.decided(session_id, decided.grant, book)
        if policy.errors:
            self._log_errors(policy.errors)
        return decided

    def asked_without_facts(self, agent: str) -> bool:
        """Whether `verdict_of` of an ask without facts from `agent` is told in one call: it is always
        an ask (`core.rules.resolver.explain_no_facts`: missing facts are never judged by rules), and
        what `_judge` does besides (the agent's config errors logged) is done here, while the policy
        `store.policy(agent)` returned last is still in force. False when only `verdict_of` can tell
        (another agent's policy was the last, or a reload came since): the caller then asks it."""
        store, last = self.store, self._last_policy
        if last is None or last[0] != agent or last[1] != store.generation or last[2] != store.composed:
            return False
        if last[3].errors:
            self._log_errors(last[3].errors)
        return True

    def _judge(
        self, parsed: ParsedRequest, session_id: str, preview: bool, alone: bool
    ) -> Judgment | Decided:
        """`judge` without a preview's grants or text; `alone`: `verdict_of`."""
        intent = parsed.request.access_intent
        if intent is None:
            agent, why = parsed.request.requester_agent_name, parsed.dropped.get("accessIntent")
            key: tuple[object, ...] = (agent, why)
        else:  # the facts' fields (`ForwardedAccessIntent.facts`), without building them
            agent, why = intent.principal.agent_name, None
            key = (agent, session_id, intent.surface, intent.match_values, intent.boundary_value,
                   intent.floor, intent.asking_units)
        # The grants before the policy: a judgment that sees a grant recorded after a reload sees the
        # reloaded policy too (the other order mixed an old policy with a new grant: a state the node
        # was never in; tests/judging/test_threads.py, under load).
        book = self._grants.get(session_id)
        if book is None:
            book = self.grants_for(session_id)
        rules = book.rules() if intent is not None else ()
        store = self.store
        generation, composed = store.generation, store.composed
        if generation != self._kept_generation:
            self._kept_generation = generation
            self._kept.clear()
            self._alike.clear()  # (each entry holds its reading, and so a policy no longer in force)
        last = self._last_policy
        if last is not None and last[0] == agent and last[1] == generation and last[2] == composed:
            policy = last[3]  # `store.policy(agent)`, as it returned it last (`PolicyStore.composed`)
        else:
            policy = store.policy(agent)
            self._last_policy = (agent, generation, composed, policy)
        kept, again = self._kept.get(key, policy, rules)
        judgment: Judgment | Decided
        if kept is not None:
            judgment, grant = kept.judgment, kept.grant
        elif again:  # kept from now on: a whole judgment
            judgment, grant = self._judged(policy, intent, rules, why)
            self._kept.keep(key, policy, rules, judgment, grant, intent)
        elif alone and intent is not None and not intent.asking_units:
            judgment, grant = self._verdict(policy, intent, rules, why)
        else:
            judgment, grant = self._judged(policy, intent, rules, why)
        if grant is not None and not preview:
            self.grant_log.decided(session_id, grant, book)
        if policy.errors:
            self._log_errors(policy.errors)
        return judgment

    def judge_afresh(
        self, parsed: ParsedRequest, session_id: str, extra: Sequence[SessionGrant] = (),
        preview: bool = False, written: tuple[Path, str] | None = None,
    ) -> Judgment:
        """`judge`, judged again whatever was kept (a preview's `extra` grants or `written` text)."""
        explanation = self.explain(parsed, session_id, extra, written)
        decision = explanation.decision
        # Only a session grant's use is counted.
        if not preview and not extra and written is None and isinstance(decision, SessionApprovalDecision):
            self.grant_log.decided(session_id, decision, self.grants_for(session_id))
        self._log_errors(explanation.config_errors)
        facts = parsed.access_intent is not None
        return _judgment(explanation, None if facts else parsed.dropped.get("accessIntent"), facts)

    def _verdict(self, policy: Policy, intent: ForwardedAccessIntent, rules: tuple[Rule, ...],
                 why: str | None) -> tuple[Judgment | Decided, SessionApprovalDecision | None]:
        """`_judged` of an ask without asking units, the compiled reading's `Decided` in place of the
        judgment when it decides (allow or deny); else the judgment whole."""
        last = self._last_compiled
        if last is not None and last.policy is policy and last.session is rules:
            compiled = last
        else:
            compiled = self._last_compiled = policy.compiled(rules)
        decided = compiled.decide(intent.surface, intent.match_values, intent.floor)
        if decided is not None and decided.verdict != "ask":
            return decided, decided.grant
        return self._judged(policy, intent, rules, why)

    def _judged(self, policy: Policy, intent: ForwardedAccessIntent | None, rules: tuple[Rule, ...],
                why: str | None) -> tuple[Judgment, SessionApprovalDecision | None]:
        """The judgment and the grant that decided it: an ask without asking units by the policy's
        compiled reading (`core.rules.compiled`) when it can tell, else in full; the explanation and
        trail are the full judgment's, built when someone reads them."""
        if intent is not None and not intent.asking_units:
            last = self._last_compiled
            if last is not None and last.policy is policy and last.session is rules:
                compiled = last  # `policy.compiled(rules)`, as it was last
            else:
                compiled = self._last_compiled = policy.compiled(rules)
            decided = compiled.decide(intent.surface, intent.match_values, intent.floor)
            if decided is not None:
                afresh = _Afresh(policy, intent, rules)
                # `Judgment(...)`, made without its frozen dataclass `__init__` (six `object.__setattr__`
                # calls: a third of the judgment of a new ask): the same value, its fields written into
                # its `__dict__` as that `__init__` writes them (`tests/judging/test_compiled_judgment.py`
                # checks every field of `Judgment` is written).
                judgment = _new_object(Judgment)
                fields = judgment.__dict__
                fields["verdict"] = decided.verdict
                fields["decided_by"] = decided.decision
                fields["reason"] = decided.reason
                fields["explanation"] = LazySequence(afresh.lines)
                fields["trail"] = LazySequence(afresh.trail)
                fields["config_errors"] = compiled.config_errors
                return judgment, decided.grant
        explanation = explain_policy(policy, None if intent is None else intent.facts(), rules)
        judgment = _judgment(explanation, why, intent is not None)
        decision = judgment.decided_by
        return judgment, decision if isinstance(decision, SessionApprovalDecision) else None

    # -- the GrantBook the person's "whole serving session" approval uses ------------------------

    def refusal(self, agent_name: str, grants: Sequence[SessionGrant]) -> str | None:
        book = SessionGrants(self.store, self.clock)
        for grant in grants:
            shadowed = book.would_shadow_deny(agent_name, grant.surface, grant.pattern)
            if shadowed is not None:
                return f"recording {shadowed.describe()}"
        return None

    def record(self, session_id: str, grants: Sequence[SessionGrant], agent_name: str) -> None:
        added = self.grants_for(session_id).add([(g.surface, g.pattern) for g in grants], agent_name)
        self.grant_log.made(session_id, added, agent_name)

    # -- grants a person can see and revoke --------------------------------------------------------

    def list_grants(self) -> list[GrantEntry]:
        """Every live whole-serving-session grant of this node, with provenance and use."""
        with self._lock:  # a snapshot: another thread may make a session's book meanwhile
            books = dict(self._grants)
        return self.grant_log.entries(books)

    def revoke_grant(self, session_id: str, grant_id: str) -> bool:
        """Remove a grant: the next ask is judged without it. False when it was already gone."""
        book = self._grants.get(session_id)
        if book is None or not book.revoke(grant_id):
            return False
        self.grant_log.forget(session_id, grant_id)
        log.info("session grant %s of %s revoked", grant_id, log_safe(session_id))
        return True

    # -- config watching -------------------------------------------------------------------------

    async def watch_config(self, stop: asyncio.Event) -> None:
        """Reload when a config file changes: inotify on their folders wakes it at once, and a cheap
        re-check every `CONFIG_RECHECK_S` catches the rest (a folder made later, no inotify)."""
        watch = FolderWatch()
        try:
            while not stop.is_set():
                watch.arm(sorted({str(p.parent) for p in self.store.watched_paths() if p.parent.is_dir()}))
                await watch.wait(stop, CONFIG_RECHECK_S, self.clock)
                if not stop.is_set():
                    self.reload()
        finally:
            watch.close()

    def report_config(self) -> None:
        """Log the config errors of the agent-neutral layers now, not at the first ask, and the
        person's knobs a layer children can write tried to set (ignored), once per config version."""
        policy = self.store.policy("")
        self._log_errors(policy.errors)
        ignored = ", ".join(policy.settings.ignored_knobs)
        if ignored and ignored != self._ignored_reported:  # once, not again at each reload
            log.warning("ignored knobs from config layers children can write (a project config sets none "
                        "of the person's knobs; no file turns the double press off): %s",
                        log_safe(ignored, 400))
        self._ignored_reported = ignored

    def reload(self) -> None:
        if self.store.reload_if_changed():
            self._applied()

    # -- widening reloads (the trust model: docs/design/reliability.md) ---------------------------------

    def accept(self, pending: PendingReload) -> bool:
        """Apply a held change a person reviewed; False when a newer change superseded it."""
        if not self.store.accept(pending):
            return False
        self._applied()
        return True

    def decline(self, pending: PendingReload) -> bool:
        """Keep the rules in force; the file is proposed again only when it changes again."""
        declined = self.store.decline(pending)
        if declined:
            log.warning("config change to %s declined; the previous rules stay in force", pending.path)
        return declined

    def _applied(self) -> None:
        with self._lock:
            self._reported.clear()
        log.info("config changed; rules reloaded")
        self.report_config()

    def _held(self, pending: PendingReload) -> None:
        log.warning(
            "config change to %s widens permissions and is NOT applied (review it in the app, or "
            "start serve with --accept-widening-reloads): %s",
            log_safe(pending.path, 300),
            log_safe("; ".join(pending.diff_lines()), 2000),
        )
        for listener in list(self.on_pending):
            try:
                listener(pending)
            except Exception:
                log.exception("a pending-reload listener failed")

    def _log_errors(self, errors: Sequence[ConfigError]) -> None:
        for error in errors:
            text = f"{error.path}: {error.key}: {error.reason}"
            with self._lock:
                new = text not in self._reported
                self._reported.add(text)
            if new:
                log.warning("config error (scope ignored or floored): %s", text)


def _judgment(explanation: Explanation, why: str | None, facts: bool) -> Judgment:
    """The judgment an explanation says (`why`: why the child's facts were dropped, if they were)."""
    errors = tuple(map(str, explanation.config_errors))
    return Judgment(
        verdict=explanation.verdict,
        decided_by=explanation.decision,
        reason=explanation.deny_reason,
        explanation=LazySequence(lambda: _lines(explanation, why, facts, errors)),
        trail=LazySequence(lambda: explanation.trail),
        config_errors=errors,
    )


#: Makes a `Judgment` without its `__init__` (`RecordedAuthority._judged`).
_new_object = object.__new__
#: The facts `decided_plain` remembers: asks of one value whose whole key (surface, value, floor) is
#: this long at most (memory stays bounded whatever children send: ~`MAX_ALIKE` × `MAX_ALIKE_CHARS`
#: characters; review4 finding 1: the value alone was counted).
MAX_ALIKE = 1024
MAX_ALIKE_CHARS = 1024


class _Afresh:
    """An ask's full judgment, made when its explanation or trail is first read (for a judgment the
    compiled reading made: what `explain` would say of it, exactly)."""

    __slots__ = ("_explanation", "intent", "policy", "rules")

    def __init__(self, policy: Policy, intent: ForwardedAccessIntent, rules: tuple[Rule, ...]) -> None:
        self.policy, self.intent, self.rules = policy, intent, rules
        self._explanation: Explanation | None = None

    def explanation(self) -> Explanation:
        if self._explanation is None:
            self._explanation = explain_policy(self.policy, self.intent.facts(), self.rules)
        return self._explanation

    def lines(self) -> list[str]:
        explanation = self.explanation()
        return _lines(explanation, None, True, tuple(map(str, explanation.config_errors)))

    def trail(self) -> list[Step]:
        return self.explanation().trail


def _lines(explanation: Explanation, why: str | None, facts: bool, errors: Sequence[str]) -> list[str]:
    """What the app shows under "why this node asks": the rendered trail, with context first."""
    lines = list(explanation.text)
    if not facts:
        lines.insert(0, NO_FACTS_EXPLANATION)
        if why:
            lines.insert(1, f"The child's accessIntent was malformed and dropped whole: {why}")
    elif explanation.verdict == "ask":
        lines.insert(0, _why_ask(explanation))
    lines += [f"config error: {e}" for e in errors]
    if explanation.suspicious_agent_reason:
        lines.append(f"suspicious agent name: {explanation.suspicious_agent_reason}")
    return lines


def _why_ask(explanation: Explanation) -> str:
    """The rule that said ask (an ask has no `decidedBy`, so the judgment's own outcome says)."""
    outcome = explanation.resolution.outcome
    if outcome is not None and outcome.floor:
        return f"The child's floor {outcome.floor!r} turns this node's allow into ask."
    if outcome is None or outcome.rule.layer not in ("config", "session"):
        return "No rule of this node decided: the default is ask."
    return f"This node's rule {outcome.matched_pattern!r} ({outcome.origin} layer) says ask."


class LinkChain:
    """The chain on the child's facts; links never see `requesterCwd` or `principal`."""

    def __init__(self, chain: AuthorizerChain) -> None:
        self.chain = chain

    async def review(self, parsed: ParsedRequest) -> Judgment | None:
        facts = parsed.facts
        if facts is None:
            return None
        decision = await self.chain.review(facts)
        if decision is None:
            return None
        kind = decision.verdict.kind
        verdict: Literal["allow", "deny"] = "allow" if kind == "allow" else "deny"
        source = AuthorizerDecision(name=decision.link, verdict=verdict, reason=decision.verdict.reason)
        return Judgment(
            verdict=verdict,
            decided_by=source,
            reason=decision.verdict.reason if verdict == "deny" else None,
            explanation=(f"chain link {decision.link!r} said {kind}",),
        )

