"""What this OS offers (`core.platform`): every module imports and `serve` answers an ask on a Python
without Linux's `os` names (as macOS's), and `PI_AUTHORIZER_PORTABLE=1` turns every Linux-only
capability off. Each runs in a subprocess: the switch and the names are read once, at import."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from core.platform import LINUX_ONLY_OS
from tests.helpers import poll_until, response_path, write_request

REPO = Path(__file__).resolve().parents[2]

WITHOUT_LINUX = textwrap.dedent(
    f"""
    import os, sys
    for name in {sorted(LINUX_ONLY_OS)!r}:
        if hasattr(os, name):
            delattr(os, name)
    import importlib, pkgutil, core, tui
    for package in (core, tui):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    from core import platform
    assert not platform.O_PATH and not platform.O_TMPFILE and not platform.anonymous_files()
    print("imported", flush=True)
    from tui.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def test_every_module_imports_and_serve_answers_without_linux_os_names(tmp_path: Path) -> None:
    """Why a subprocess (~2 s): the `os` names are deleted before anything of this project imports."""
    root = tmp_path / "root"
    proc = subprocess.Popen(
        [sys.executable, "-c", WITHOUT_LINUX, "serve", "--session", "mac", "--forwarding-root", str(root),
         "--create", "--state-dir", str(tmp_path / "state")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        poll_until(lambda: bool(list((root / "serving").glob("*.json"))) or proc.poll() is not None,
                   what="a heartbeat")
        assert proc.poll() is None, proc.communicate()
        write_request(root, "mac", "ask-1")
        answer = response_path(root, "mac", "ask-1")
        poll_until(answer.exists, what="the response")
        body = json.loads(answer.read_text())
        assert body["approved"] is False and body["denialReason"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.startswith("imported") and "Traceback" not in err


def test_the_portable_switch_turns_off_every_linux_capability(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import os
        from core import platform
        fd = os.open(".", platform.DIR_FLAGS)
        open("a", "w").close()
        print(platform.PORTABLE, platform.LINUX, platform.O_PATH, platform.O_TMPFILE,
              platform.anonymous_files(), platform.proc_names_descriptors(), platform.syncfs(fd),
              platform.rename_noreplace(fd, "a", "b"), platform.inotify_calls(), platform.watch_backend(),
              platform.is_zombie(os.getpid()))
        """
    )
    env = {**os.environ, "PI_AUTHORIZER_PORTABLE": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=60, check=True)
    assert result.stdout.split() == ["True", "False", "0", "0", "False", "False", "False", "None", "None",
                                     "polling", "False"]
