"""History truth: time to decide counts from when the ask was shown; asks withdrawn while no one
served are closed at the next start; retention comes from the command line."""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.person import HumanAuthorizer
from core.serving import ServingCore
from core.serving.asks import AskKey
from core.wiring import take_session
from tests.helpers import wait_for, write_request
from tests.history.support import Node, S, intent
from tui.commands.options import add_serving_options


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    n = Node(tmp_path)
    yield n
    if hasattr(n, "task"):
        await n.stop()


async def test_time_to_decide_counts_from_when_the_ask_was_shown(node: Node) -> None:
    human = HumanAuthorizer()
    await node.start(human)
    write_request(node.root, S, "p", accessIntent=intent("bash", "make test"))
    await wait_for(lambda: bool(human.pending()), what="pending ask")
    arrived = node.only_row().arrived_at
    shown = arrived - 100.0  # an explicit, distinct instant: the span must start here, not at arrival
    node.history.mark_shown(AskKey(S, "p.json"), shown)
    await human.approve_once(human.pending()[0].key)
    await wait_for(lambda: node.only_row().decided_at is not None, what="decided row")
    row = node.only_row()
    assert row.shown_at == shown and row.decided_at is not None and row.decide_ms is not None
    assert row.decide_ms == pytest.approx((row.decided_at - shown) * 1000)
    assert row.decide_ms >= 100_000


def serve_args(node: Node) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serving_options(parser)
    return parser.parse_args(["--forwarding-root", str(node.root), "--state-dir", str(node.state)])


async def test_an_ask_withdrawn_while_no_one_served_is_closed_at_start(node: Node) -> None:
    human = HumanAuthorizer()
    await node.start(human)
    gone = write_request(node.root, S, "gone", accessIntent=intent("bash", "make a"))
    write_request(node.root, S, "stays", accessIntent=intent("bash", "make b"))
    await wait_for(lambda: len(human.pending()) == 2, what="two pending asks")
    await node.stop()
    gone.unlink()  # the child gave up while pi-authorizer was down
    assert {r.outcome for r in node.history.query()} == {"pending"}

    core = ServingCore(node.root, node.state, HumanAuthorizer(), ledger=node.history)
    assert take_session(core, node.history, S).inbox.session_id == S
    try:
        outcomes = {r.request_id: (r.outcome, r.ended_at is not None) for r in node.history.query()}
        assert outcomes == {"gone": ("withdrawn", True), "stays": ("pending", False)}
    finally:
        for served in core.served:
            served.heartbeat.clear()
            served.lock.release()


def test_retention_from_the_command_line(tmp_path: Path) -> None:
    from core.history import HistoryStore
    from tui.commands.node import open_history

    state = tmp_path / "state"
    old = {"served_session": "s", "request_name": "old.json", "arrived_at": time.time() - 3 * 86400,
           "outcome": "rule"}
    new = {**old, "request_name": "new.json", "arrived_at": time.time()}
    HistoryStore.in_state_dir(state).insert_rows([old, new])
    parser = argparse.ArgumentParser()
    add_serving_options(parser)
    args = parser.parse_args(["--state-dir", str(state), "--keep-history", "2d", "--keep-history-rows", "10"])
    store = open_history(args)
    assert store is not None
    assert store.retention.max_age_s == 2 * 86400 and store.retention.max_rows == 10
    assert [r.request_name for r in store.query()] == ["new.json"]
    forever = open_history(
        parser.parse_args(["--state-dir", str(state), "--keep-history", "0", "--keep-history-rows", "0"])
    )
    assert forever is not None and (forever.retention.max_age_s, forever.retention.max_rows) == (None, None)
