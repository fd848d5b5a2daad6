"""`pi-authorizer demo --remote`: one queue across hosts. An embedded nats-server, two simulated hosts
(each a forwarding root whose children ask a courier node, which carries what its own rules leave to
the broker) and the app serving the broker (`--broker`): both hosts' asks in one queue, each answered
once, the verdict relayed to the child on its host.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.courier.targets import parse_target
from core.vocabulary.asks import DenyingArbiter
from core.wiring import Node, NodeOptions, build_node
from tui.demo.children import ChildResult
from tui.demo.nats_server import NatsServer
from tui.demo.scenario import run_children

#: The simulated hosts, and the session their children forward to on each.
HOSTS = ("host-a", "host-b")
#: What a host's courier node decides itself (its recorded authority resolves locally, ADR §1).
HOST_CONFIG = {"permission": {"bash": {"git status *": "allow", "rm -rf *": "deny"}}}


@dataclass(frozen=True)
class RemoteHost:
    """One simulated host: its forwarding root, the session its children ask, its courier node."""

    name: str
    root: Path
    session: str
    node: Node


class RemoteDemo:
    """The broker and the two hosts, built in `base`; `run` drives them in the app's event loop."""

    def __init__(self, base: Path, binary: Path) -> None:
        folder = base / "nats"
        folder.mkdir(parents=True)
        self.server = NatsServer(binary, folder)
        self.hosts: list[RemoteHost] = []
        self.base = base

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> None:
        """Start the broker (raises RuntimeError with its log's tail) and build each host's courier."""
        self.server.start()
        for name in HOSTS:
            home = self.base / name
            config = home / "agent" / "extensions" / "pi-permission-system" / "config.json"
            config.parent.mkdir(parents=True)
            config.write_text(json.dumps(HOST_CONFIG), encoding="utf-8")
            root = home / "root"
            root.mkdir()
            options = NodeOptions(root, home / "state", home / "agent", home / "project",
                                  forward_to=parse_target(self.url), node_name=f"courier-{name}", host=name)
            node = build_node(options, None, DenyingArbiter())
            session = f"demo-{name}"
            node.take_session(session)
            self.hosts.append(RemoteHost(name, root, session, node))

    async def serve(self) -> None:
        """Serve both hosts' inboxes until cancelled (the app's worker ends with the app)."""
        cores = [asyncio.create_task(host.node.core.run()) for host in self.hosts]
        try:
            await asyncio.gather(*cores)
        finally:
            for host in self.hosts:
                host.node.core.stop()
            await asyncio.gather(*cores, return_exceptions=True)

    async def ask(self, report: Callable[[str, ChildResult], None], *, pause_s: float,
                  rounds: int | None) -> None:
        """Both hosts' children send the demo's asks (`rounds` rounds, None: no end); each result is
        reported with its host."""
        await asyncio.gather(*(
            run_children(host.root, host.session, functools.partial(report, host.name), asyncio.Event(),
                         pause_s=pause_s, rounds=rounds)
            for host in self.hosts
        ))

    def close(self) -> None:
        self.server.kill()
