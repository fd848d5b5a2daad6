"""Issue 20 by hand: the real app in tmux with real request files, at a side-terminal size.

    uv run python scripts/tmux_issue20.py [--size 80x24] [--keep]

`pi-authorizer app` runs in a detached tmux session on a temporary forwarding root, with a `--rules`
file and a project config that tries to set the person's knobs (`yoloMode`, swapped dialog keys).
Request files (with facts) are written as a child writes them (temp + rename). The script then types
what a person types and prints every screen it reads (`capture-pane -p`), checking:

1. the ignored project knobs are reported, and `n` still denies (the keys were not swapped);
2. `R` on an ask lists every pending ask the rule decides now and says its reach; `end` then `y`
   writes it and decides exactly those (a file written after the dialog was painted waits);
3. `w` lists the other asks its grant decides; a batch of the rest (`*`, `Y`, `end`, `y` `y`);
4. a request renamed over under its id while shown: the queue shows the new bytes.

Each check prints PASS/FAIL; the exit code is the number of failures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.disk.paths import encode_session_id  # noqa: E402

SESSION = "019ff969-c34c-70be-9034-fae19c852932"
GRACE_S = 0.8
WAIT_S = 20.0


def body(rid: str, value: str, agent: str = "Explore", pattern: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "id": rid, "createdAt": int(time.time() * 1000), "requesterSessionId": "child-1",
        "targetSessionId": SESSION, "requesterAgentName": agent,
        "message": f"Agent '{agent}' requested bash command '{value}'. Allow this command?",
        "source": "tool_call", "surface": "bash", "value": value,
        "accessIntent": {"surface": "bash", "matchValues": [value], "boundaryValue": None,
                         "requesterCwd": "/w", "principal": {"sessionId": "child-1", "agentName": agent}},
    }
    if pattern is not None:
        found["sessionApproval"] = {"grants": [{"surface": "bash", "pattern": pattern}]}
    return found


class Run:
    def __init__(self, tmp: Path, size: str) -> None:
        self.tmp, self.size, self.name = tmp, size, f"pi-auth-i20-{os.getpid()}"
        self.root = tmp / "forwarding"
        self.inbox = self.root / "sessions" / encode_session_id(SESSION)
        self.rules = tmp / "rules.json"
        self.failures = 0

    def start(self) -> None:
        (self.inbox / "requests").mkdir(parents=True)
        (self.inbox / "responses").mkdir()
        agent = self.tmp / "agent"
        (agent / "extensions" / "pi-permission-system").mkdir(parents=True)
        (agent / "extensions" / "pi-permission-system" / "config.json").write_text('{"permission": {}}')
        project = self.tmp / "project" / ".pi" / "extensions" / "pi-permission-system"
        project.mkdir(parents=True)
        (project / "config.json").write_text(json.dumps(
            {"yoloMode": True, "permissionDialogKeys": {"approve": "n", "deny": "y"}}))
        self.rules.write_text("{}\n")
        cols, rows = self.size.split("x")
        command = [sys.executable, "-c", "import sys; from tui.cli import main; sys.exit(main())", "app",
                   "--session", SESSION, "--forwarding-root", str(self.root), "--state-dir",
                   str(self.tmp / "state"), "--agent-dir", str(agent), "--project", str(self.tmp / "project"),
                   "--rules", str(self.rules)]
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", cols, "-y", rows,
                        "-c", str(REPO), " ".join(f"'{c}'" for c in command)], check=True)

    def write(self, rid: str, value: str, **kw: Any) -> None:
        temp = self.inbox / "requests" / f"{rid}.json.{time.time_ns()}.tmp"
        temp.write_text(json.dumps(body(rid, value, **kw)))
        temp.rename(self.inbox / "requests" / f"{rid}.json")

    def response(self, rid: str) -> dict[str, Any] | None:
        path = self.inbox / "responses" / f"{rid}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def keys(self, *keys: str) -> None:
        for key in keys:
            subprocess.run(["tmux", "send-keys", "-t", self.name, key], check=True)
            time.sleep(0.15)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True,
                              text=True, check=False).stdout

    def wait(self, what: str, test: Any) -> bool:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if test():
                return True
            time.sleep(0.1)
        return False

    def check(self, what: str, ok: bool) -> None:
        print(f"{'PASS' if ok else 'FAIL'}: {what}")
        self.failures += 0 if ok else 1

    def show(self, title: str) -> None:
        print(f"--- {title} ---\n{self.screen()}")

    def stop(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False, capture_output=True)


def walk(run: Run) -> None:
    run.write("a1", "npm run lint", pattern="npm run *")
    run.write("a2", "npm run lint", agent="Builder")
    run.write("a3", "make docs")
    run.check("three asks listed", run.wait("rows", lambda: run.screen().count("Explore") >= 1
                                            and "3 pending" in run.screen()))
    run.show("queue")
    run.check("ignored project knobs reported", "yoloMode" in run.screen() or "Ignored" in run.screen())
    time.sleep(GRACE_S)
    run.keys("R")
    run.check("R dialog opens", run.wait("dialog", lambda: "Add this rule?" in run.screen()))
    run.show("R dialog")
    run.write("a4", "npm run lint")  # after the paint: not listed, not decided by the step
    time.sleep(GRACE_S)
    run.keys("End")  # the scroll animates: y counts once the end was on screen
    run.check("R: the end seen", run.wait("end", lambda: "more below" not in run.screen()))
    run.show("R dialog, end")
    run.keys("y")
    decided = run.wait("R decided", lambda: run.response("a1") is not None and run.response("a2") is not None)
    run.check("R decided exactly the listed asks", decided and run.response("a4") is None)
    run.show("after R")
    for i in range(5):
        run.write(f"g{i}", f"git push origin b{i}", pattern="git push *")
    run.check("asks for w", run.wait("rows", lambda: "7 pending" in run.screen()))
    time.sleep(GRACE_S)
    run.keys("End")  # select the last ask (a git push)
    time.sleep(GRACE_S)
    run.keys("w")
    run.check("w confirmation", run.wait("w", lambda: "WHOLE serving session" in run.screen()))
    time.sleep(GRACE_S)
    run.show("w confirmation")
    run.keys("End")
    run.check("w: the end seen", run.wait("end", lambda: "more below" not in run.screen()))
    run.keys("y")
    run.check("w decided the five", run.wait("w done", lambda: all(run.response(f"g{i}") for i in range(5))))
    run.show("after w")
    run.write("r1", "ls -la /etc")
    run.check("r1 listed", run.wait("r1", lambda: "ls -la" in run.screen()))
    run.keys("End")  # select it: its detail shows its bytes
    time.sleep(GRACE_S)
    run.write("r1", "rm -rf ~")  # renamed over under its id while shown
    run.check("the new bytes are shown", run.wait("rewrite", lambda: "rm -rf" in run.screen()
                                                  and "ls -la" not in run.screen()))
    run.show("after the rename over")
    run.keys("End")
    time.sleep(GRACE_S)
    run.keys("n")
    time.sleep(0.2)
    run.keys("n")
    denied = run.wait("denied", lambda: run.response("r1") is not None)
    answer = run.response("r1") or {}
    run.check("n denied (keys not swapped by the project)", denied and answer.get("approved") is False)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="80x24")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pi-auth-i20-"))
    run = Run(tmp, args.size)
    try:
        run.start()
        walk(run)
    finally:
        run.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{run.failures} failure(s)")
    return run.failures


if __name__ == "__main__":
    sys.exit(main())
