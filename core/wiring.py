"""The one place that builds a serving node's object graph, for every command (`serve`, `run`, the app,
`demo`): the rules, the chain, the history ledger, the serving core and its arbiter.

Commands turn their options into a `NodeOptions` and call `build_node` (headless) or
`build_attended_node` (a person decides); nothing else wires these parts together, so what serves
an ask is read here, top to bottom. A built node hands out its parts by name (the app is given an
`AttendedNode` and never looks inside the core for them), and takes a session with `take_session`.
"""

from __future__ import annotations

import logging
import socket
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from core.courier.arbiter import CourierArbiter, Fallback
from core.courier.broker_access import BrokerAccess, node_key_of
from core.courier.broker_health import BrokerHealth
from core.courier.broker_inbox import BrokerInbox
from core.courier.carried import CarriedAsks
from core.courier.parcel_ids import ParcelIds
from core.courier.signing import NodeKey, SigningRefused
from core.courier.targets import CourierPlace, Target, TargetError, build_courier
from core.history import HistoryStore
from core.judging.judge_setup import JudgeSettings, build_judge_chain, close_when_stopped
from core.judging.links import AuthorizerChain, CommandLink
from core.judging.model_judge import JudgeChain
from core.judging.recorded import LinkChain, RecordedAuthority
from core.person import Person
from core.rules import PolicyStore
from core.rules.accepted import RECORD_NAME as ACCEPTED_RECORD
from core.seams import PRODUCTION, Seams
from core.serving import ServedSession, ServingCore
from core.vocabulary.asks import Arbiter

log = logging.getLogger("pi_authorizer.serve")

#: As a process ends while serving still runs: how long the history's transaction in progress is
#: waited for before what is queued is kept (`Node.close`).
CLOSE_WAIT_S = 2.0


@dataclass(frozen=True)
class NodeOptions:
    """Where a node serves and what it judges with."""

    forwarding_root: Path
    state_dir: Path
    agent_dir: Path
    project: Path
    rules_file: Path | None = None
    accept_widening: bool = False
    links: tuple[CommandLink, ...] = ()
    #: Time, the disk, the fault hook, the retry delays and the file watch (`core.seams`).
    seams: Seams = PRODUCTION
    #: `--forward-to`: the courier carries what this node leaves undecided there (`core.courier`).
    forward_to: Target | None = None
    #: `--broker-access`: credentials and TLS for the broker (`--broker`, `--forward-to nats://`).
    broker_access: BrokerAccess | None = None
    #: The host this node names in a carried ask's hops and its broker subjects.
    host: str = field(default_factory=socket.gethostname)
    #: `--broker`: this node also serves the asks couriers put on that NATS broker (`nats://HOST:PORT`).
    broker: str | None = None
    #: This node's name in a carried ask's hops and its broker consumer (stable across restarts: its
    #: own session id).
    node_name: str = "pi-authorizer"
    #: `--judge`: the model judge after the links (`core.judging.model_judge`, `docs/judge.md`).
    judge: JudgeSettings | None = None


@dataclass(frozen=True)
class Node:
    """A built node: the serving core, this node's recorded authority, and its ledger (if any)."""

    core: ServingCore
    authority: RecordedAuthority
    history: HistoryStore | None
    #: The model judge's chain, when `--judge` is given (its breaker, its advice, its record).
    model_judge: JudgeChain | None = None
    #: With `--broker`: that broker's state as this node sees it (for the person).
    broker_health: BrokerHealth | None = None

    def take_session(self, raw_id: str) -> ServedSession:
        return take_session(self.core, self.history, raw_id)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """As the process ends: what the history could not write yet is written, or spooled beside it
        for the next start (`HistoryStore.close`), never dropped with the process. Its connection is
        closed only once serving has ended (`ServingCore.ended`); else it stays open for what still
        runs, and a transaction in progress is waited for `wait_s` at most."""
        close_history(self.history, self.core, wait_s)


@dataclass(frozen=True)
class AttendedNode:
    """What the app is handed, each part by name: the serving core (`run`, `stop`, `subscribe`,
    `served`), the person's API, this node's recorded authority (rules, whole-session grants, config
    reviews) and its history; `None` where a node has none (tests attend bare cores)."""

    core: ServingCore
    person: Person
    authority: RecordedAuthority | None = None
    history: HistoryStore | None = None
    #: With `--forward-to`: the courier that takes the asks first (the person decides what it cannot).
    courier: CourierArbiter | None = None
    #: The model judge's chain, when `--judge` is given: its advice on each ask, its breaker.
    model_judge: JudgeChain | None = None
    #: The brokers this node talks to (`--broker`, `--forward-to nats://`), each one's state.
    brokers: tuple[BrokerHealth, ...] = ()

    def take_session(self, raw_id: str) -> ServedSession:
        return take_session(self.core, self.history, raw_id)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """As the process ends: what the history could not write yet is written, or spooled beside it
        for the next start (`HistoryStore.close`), never dropped with the process. Its connection is
        closed only once serving has ended (`ServingCore.ended`); else it stays open for what still
        runs, and a transaction in progress is waited for `wait_s` at most."""
        close_history(self.history, self.core, wait_s)


def close_history(history: HistoryStore | None, core: ServingCore, wait_s: float) -> None:
    """`Node.close`, said and not raised: an ending process has nothing else to do with it."""
    if history is None:
        return
    try:
        if core.ended:
            history.close()
        else:
            history.close(keep_open=True, wait_s=wait_s)
    except Exception:
        log.exception("closing the history failed")


class HistoryFailed(Exception):
    """The session is served, but its history could not be reconciled: the database failed.

    Its open rows stay `pending` until a later start reconciles them; serving goes on (no answer is
    published without the ledger's commit, so a failing database holds answers back, never loses them)."""

    def __init__(self, served: ServedSession, cause: sqlite3.Error) -> None:
        super().__init__(str(cause))
        self.served = served


def take_session(core: ServingCore, history: HistoryStore | None, raw_id: str) -> ServedSession:
    """Serve a session (raises what `ServingCore.add_session` raises), then close in the history the
    asks whose request files went while nobody served it: not `pending` forever. Raises
    `HistoryFailed` (the session served) when the database fails."""
    served = core.add_session(raw_id)
    if history is not None:
        try:
            history.reconcile_open(served.inbox.session_id, set(served.inbox.list_request_names()),
                                   delivered=served.inbox.response_is)
        except sqlite3.Error as exc:
            raise HistoryFailed(served, exc) from exc
    return served


def build_node(options: NodeOptions, history: HistoryStore | None, arbiter: Arbiter) -> Node:
    """A headless node: `arbiter` (deny, leave) is its last judge, or, with `forward_to`, a courier
    to that target whose fallback it is (raises `core.courier.targets.TargetError` when the target's
    transport cannot be built here).

    `history` is opened by the caller, who decides what an unusable one means (the CLI refuses to
    serve: never silently without it)."""
    return _node(options, history, _authority(options), courier_arbiter(options, arbiter) or arbiter)


def courier_arbiter(options: NodeOptions, fallback: Arbiter) -> CourierArbiter | None:
    """The courier to `options.forward_to` (None without one); when it cannot reach its target it
    does what `fallback` does: deny (naming the target and why), leave the ask, or ask the person."""
    if options.forward_to is None:
        return None
    place = CourierPlace(options.forwarding_root, options.seams.clock, options.node_name,
                         options.broker_access, options.state_dir)
    courier = build_courier(options.forward_to, place)
    otherwise: Fallback = fallback
    if fallback.name == "deny":
        otherwise = "deny"  # the courier's own denial, naming the target and why
    elif fallback.name == "leave":
        otherwise = "leave"
    return CourierArbiter(courier, otherwise, options.seams.clock, host=options.host,
                          node=options.node_name, ids=ParcelIds(options.state_dir / "parcels"),
                          carried=CarriedAsks(options.state_dir / "carried", options.forwarding_root))


def build_attended_node(options: NodeOptions, history: HistoryStore | None) -> AttendedNode:
    """A node a person attends (the app): the person is its last judge, and records whole-session
    grants in this node's recorded authority. With `forward_to` the courier is, and the person
    decides only what the target cannot (unreachable, or no answer before the child's deadline)."""
    authority = _authority(options)
    person = Person(grants=authority, clock=options.seams.clock)
    courier = courier_arbiter(options, person)
    node = _node(options, history, authority, courier or person, attended=True)
    brokers = [node.broker_health] if node.broker_health is not None else []
    carrying = getattr(courier.courier, "health", None) if courier is not None else None
    if isinstance(carrying, BrokerHealth):
        brokers.append(carrying)
    return AttendedNode(node.core, person, authority, history, courier, node.model_judge,
                        brokers=tuple(brokers))


def _node_key(options: NodeOptions) -> NodeKey:
    """This node's signing key for `--broker` (made at its first start); raises `TargetError` (the
    command line's refusal) when the key file cannot be used."""
    try:
        return node_key_of(options.broker_access, options.state_dir, options.node_name)
    except (SigningRefused, OSError) as exc:
        raise TargetError(f"--broker {options.broker}: this node's key cannot be used: {exc}") from exc


def _authority(options: NodeOptions) -> RecordedAuthority:
    return RecordedAuthority(
        PolicyStore(options.agent_dir, options.project, options.rules_file,
                    accept_widening=options.accept_widening,
                    accepted=options.state_dir / ACCEPTED_RECORD),
        options.seams.clock,
    )


def _node(
    options: NodeOptions, history: HistoryStore | None, authority: RecordedAuthority, arbiter: Arbiter,
    attended: bool = False,
) -> Node:
    relaying = options.forward_to is not None
    links = LinkChain(AuthorizerChain(options.links, relaying=relaying)) if options.links else None
    judge = None if options.judge is None else build_judge_chain(
        options.judge, links, options.state_dir if history is not None else None, attended=attended,
        relaying=relaying, clock=options.seams.clock)
    chain: LinkChain | JudgeChain | None = judge or links
    core = ServingCore(
        options.forwarding_root,
        options.state_dir,
        arbiter,
        judge=authority,
        chain=chain,
        timeout_ms=lambda: authority.store.policy("").settings.forwarding_timeout_ms,
        ledger=history,
        seams=options.seams,
    )
    if history is not None:
        core.subscribe(history.observe, history.observe_all)
    if isinstance(arbiter, CourierArbiter):
        core.add_background(arbiter.run_until)
    health: BrokerHealth | None = None
    if options.broker is not None:
        inbox = BrokerInbox(options.broker, node=options.node_name, judge=authority, arbiter=arbiter,
                            chain=chain, clock=options.seams.clock, ledger=history,
                            observe=None if history is None else history.observe,
                            access=options.broker_access, node_key=_node_key(options))
        health = inbox.health = BrokerHealth(inbox.url)
        core.add_background(inbox.run_until)
    core.add_background(authority.watch_config)
    if judge is not None:
        core.add_background(lambda stop: close_when_stopped(judge, stop))
    authority.report_config()
    return Node(core, authority, history, judge, broker_health=health)
