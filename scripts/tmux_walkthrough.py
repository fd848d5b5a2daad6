"""A person's walk through the real app in tmux, with real children: batches, a grant and its revoke, a close.

    uv run python scripts/tmux_walkthrough.py [--size 80x24] [--size 120x40] [--no-node] [--keep]

For each size: `pi-authorizer app` runs in a detached tmux session of that size on a temporary
forwarding root (no rules, so every ask reaches the person). Children ask, each in its own process:
three simulated children (`tui.demo.children`: a newest-generation bash ask, a 20.7.3-shaped ask, and
one whose command holds hidden characters) and, when node is installed and `npm ci` was run in
tests/interop/node, the real @gotgenes/pi-permission-system 20.7.3 child (`child_ask.ts`). The
script then types what a person types (`send-keys`) and reads what they see (`capture-pane -p`):

1. `*` marks every ask shown, `Y` opens the batch preview: it must list every batchable ask and
   leave the hidden-character one out; after the grace window `y` `y` (double press) confirms.
2. Every batched child must receive `approved` decided by the user; the hidden-character ask must
   still be pending and selected for a look of its own.
3. A grant: a child asks `npm run lint` suggesting `npm run *`; `G` selects it, `w` and the
   confirmation's `y` record the whole-session grant. That child receives `approved` (the user); a
   second child's `npm run test` is then approved by the grant with no key pressed
   (`decidedBy.kind` `session_approval`).
4. Its revoke: `W` lists the grant, `x` `x` revokes it, `esc` goes back; a third child's
   `npm run docs` then waits in the queue (the grant no longer decides it).
5. A batch denial with a reason: `G` `space` marks that ask, `N` previews, `r` + typed text +
   `enter` sets the reason, `y` `y` confirms; the child receives `denied_with_reason` with that text.
6. The first day's rough edges (`first_day`): a 20.7.3 ask is not offered `w` or `R`; a filter
   hiding every ask says so; after `PgDn` `h` `esc` the keys count; `End` reaches help's end at once.
7. The terminal is closed (`tmux kill-session`: SIGHUP to the app). The app must end within
   `CLOSE_LIMIT_S`, remove its serving heartbeat, and leave the unanswered request in the inbox for
   the next authorizer; that child received nothing.

Each check prints PASS/FAIL; the exit code is the number of failures. Screens are printed as seen.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.disk.paths import encode_session_id  # noqa: E402
from core.forwarding.liveness import heartbeat_path  # noqa: E402
from tui.demo.children import SimulatedChild  # noqa: E402
from tui.demo.scenario import legacy, newest  # noqa: E402

NODE_DIR = REPO / "tests" / "interop" / "node"
GRACE_S = 0.8  # a little over the app's default 500 ms input grace
CLOSE_LIMIT_S = 1.0
REASON = "not today: the release is frozen"
WAIT_S = 30.0
HIDDEN = "ls \u202eexe.txt\u200b \x1b]0;PWNED\x07"
REAL_ASK = {
    "requestId": "ignored-by-20.7.3",
    "source": "tool_call",
    "message": "Agent 'Scout' requested bash command 'git fetch origin'. Allow this command?",
    "surface": "bash",
    "value": "git fetch origin",
    "toolName": "bash",
}


# -- a simulated child, run as its own process ------------------------------------------------------


def child_body(kind: str, child: SimulatedChild) -> dict[str, Any]:
    def intent(value: str) -> dict[str, Any]:
        return {"surface": "bash", "matchValues": [value], "boundaryValue": None, "requesterCwd": child.cwd,
                "principal": {"sessionId": child.session_id, "agentName": child.agent}}

    if kind == "newest":
        value = "npm run build && npm test"
        return newest(child, "bash", value, intent(value), [("bash", "npm run *")], "bash")
    if kind == "legacy":
        return legacy(child, "bash", "make lint", ["make *"])
    if kind.startswith("npm:"):
        value = kind.removeprefix("npm:")
        return newest(child, "bash", value, intent(value), [("bash", "npm run *")], "bash")
    return newest(child, "bash", HIDDEN, intent(HIDDEN), [], "bash")


def run_child(root: str, target: str, agent: str, session: str, kind: str, out: str) -> int:
    """Ask once and wait like a child; write what was received (the raw response) to `out`."""
    child = SimulatedChild(Path(root), target, agent, session, f"/worktrees/{agent.lower()}")
    body = {**child_body(kind, child), "id": f"toolu_walk_{agent.lower()}_{os.getpid()}"}  # one id per child
    request = child.write(body)
    response = child.folder / "responses" / f"{body['id']}.json"
    Path(out).write_text(json.dumps({"id": body["id"], "request": str(request), "response": None}))
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if response.exists():
            received = json.loads(response.read_bytes())
            record = {"id": body["id"], "request": str(request), "response": received}
            Path(out).write_text(json.dumps(record))
            response.unlink()
            request.unlink(missing_ok=True)
            return 0
        time.sleep(0.1)
    return 1


# -- the walk -------------------------------------------------------------------------------------------


class Walk:
    def __init__(self, size: tuple[int, int], base: Path, node: bool) -> None:
        self.width, self.height = size
        self.base = base
        self.node = node
        self.name = f"pi-authorizer-walk-{os.getpid()}-{self.width}x{self.height}"
        self.session = f"walkthrough-{self.width}x{self.height}"
        self.agent_dir = base / "agent"
        self.root = self.agent_dir / "sessions" / "permission-forwarding"
        self.state = base / "state"
        self.failures = 0
        self.children: list[subprocess.Popen[bytes]] = []

    def check(self, ok: bool, what: str) -> None:
        print(f"  {'PASS' if ok else 'FAIL'}  {what}")
        self.failures += 0 if ok else 1

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)

    def received(self, out: Path, within: float = WAIT_S) -> Any:
        """What a simulated child received (its raw response), waiting for it; None if nothing came."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:  # the simulated child may be writing it right now
                got = json.loads(out.read_text())["response"]
            except (FileNotFoundError, json.JSONDecodeError):
                got = None
            if got is not None:
                return got
            time.sleep(0.1)
        return None

    def wait_screen(self, pattern: str, within: float = WAIT_S) -> str:
        deadline = time.monotonic() + within
        while True:
            text = self.screen()
            if re.search(pattern, text):
                return text
            if time.monotonic() > deadline:
                print(text)
                raise TimeoutError(f"never saw {pattern!r} on screen")
            time.sleep(0.1)

    def show(self, title: str, text: str) -> None:
        print(f"  --- {title} ({self.width}x{self.height}) ---")
        for line in text.rstrip("\n").splitlines():
            print(f"  |{line}")

    def start_app(self) -> int:
        for path in (self.agent_dir, self.root, self.state, self.base / "project"):
            path.mkdir(parents=True, exist_ok=True)
        app = Path(sys.executable).parent / "pi-authorizer"
        command = [str(app), "app", "--session", self.session, "--forwarding-root", str(self.root),
                   "--state-dir", str(self.state), "--agent-dir", str(self.agent_dir),
                   "--project", str(self.base / "project")]
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(self.width), "-y", str(self.height),
                  "env", f"PI_CODING_AGENT_DIR={self.agent_dir}", *command)
        pid = int(self.tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())
        self.wait_screen(r"no pending asks")
        return pid

    def simulated(self, agent: str, kind: str) -> Path:
        out = self.base / f"child-{agent}.json"
        session = f"child-{agent.lower()}-{self.width}x{self.height}"
        self.children.append(subprocess.Popen(
            [sys.executable, __file__, "--child", str(self.root), self.session, agent, session, kind,
             str(out)], cwd=REPO, start_new_session=True))
        return out

    def real_child(self) -> Path | None:
        tsx = NODE_DIR / "node_modules" / "tsx" / "dist" / "cli.mjs"
        node = shutil.which("node")
        if not self.node or node is None or not tsx.exists():
            print("  (skipped: the real 20.7.3 child needs node and `npm ci` in tests/interop/node)")
            return None
        out = self.base / "child-real-20.7.3.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "NODE_OPTIONS"))}
        env.update({"PI_SUBAGENT_PARENT_SESSION": self.session, "PI_IS_SUBAGENT": "1"})
        with out.open("w") as sink:
            self.children.append(subprocess.Popen(
                [node, str(tsx), str(NODE_DIR / "child_ask.ts"), str(self.root),
                 f"real-child-{self.width}x{self.height}", "Scout", json.dumps(REAL_ASK)],
                cwd=NODE_DIR, env=env, stdout=sink, stderr=subprocess.DEVNULL, start_new_session=True))
        return out

    def run(self) -> int:
        print(f"== {self.width}x{self.height}: tmux session {self.name}")
        pid = self.start_app()
        try:
            self.walk(pid)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)
            for child in self.children:  # each child runs in its own process group
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        return self.failures

    def walk(self, pid: int) -> None:
        batched = {"Builder": self.simulated("Builder", "newest"),
                   "Legacy": self.simulated("Legacy", "legacy")}
        hostile = self.simulated("Mallory", "hidden")
        real = self.real_child()
        total = 3 + (real is not None)
        seen = self.wait_screen(rf"{total} pending")
        time.sleep(GRACE_S)
        self.show("the queue", seen)

        self.keys("*", "Y")
        preview = self.wait_screen(r"these \d+ asks\?")
        self.show("the batch preview", preview)
        batchable = total - 1
        self.check(f"these {batchable} asks?" in preview,
                   f"the preview lists the {batchable} batchable asks")
        self.keys("End")  # at 80x24 the list is longer than the dialog: y waits until its end was seen
        deadline = time.monotonic() + 10  # read once scrolled and painted whole (not a frame half drawn)
        while time.monotonic() < deadline and not ("hidden characters" in preview
                                                   and "more below" not in preview):
            time.sleep(0.1)
            preview = self.screen()
        self.check("hidden characters" in preview and "more below" not in preview,
                   "the hidden-character ask is listed apart, not batched")
        time.sleep(GRACE_S)
        self.keys("y")
        try:
            armed = self.wait_screen(r"press\s+y\s+again", within=5)
            self.check(bool(json.loads(batched["Builder"].read_text())["response"] is None),
                       "the first y only arms: nothing decided yet")
        except TimeoutError:
            self.check(False, "the first y only arms")
            armed = self.screen()
        self.show("after the first y", armed)
        self.keys("y")
        after = self.wait_screen(r"Decide this ask alone")
        self.show("after the batch", after)
        try:  # the title's count follows the note by a frame
            self.wait_screen(r"1 pending", within=10)
            self.check(True, "one ask is still pending: the hidden-character one")
        except TimeoutError:
            self.check(False, "one ask is still pending: the hidden-character one")

        deadline = time.monotonic() + WAIT_S
        results: dict[str, Any] = {}
        while time.monotonic() < deadline and len(results) < len(batched):
            for agent, out in batched.items():
                if out.exists() and json.loads(out.read_text())["response"] is not None:
                    results[agent] = json.loads(out.read_text())["response"]
            time.sleep(0.1)
        for agent in batched:
            got = results.get(agent)
            ok = got is not None and got.get("state") == "approved" and got.get("approved") is True \
                and got.get("decidedBy") == {"kind": "user", "via": "dialog"}
            self.check(ok, f"simulated child {agent} received approved, decided by the user: {got}")
        if real is not None:
            decision: Any = None
            while time.monotonic() < deadline and decision is None:
                text = real.read_text().strip()
                decision = json.loads(text) if text else None
                time.sleep(0.1)
            self.check(isinstance(decision, dict) and decision.get("approved") is True
                       and decision.get("state") == "approved", f"the real 20.7.3 child received {decision}")

        self.grant_and_revoke()
        self.first_day()

        heartbeat = heartbeat_path(self.root, self.session)
        self.check(heartbeat.exists(), "the serving heartbeat is there while the app runs")
        start = time.monotonic()
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=True)  # the terminal closes
        while _alive(pid) and time.monotonic() - start < 10:
            time.sleep(0.02)
        took = time.monotonic() - start
        if _alive(pid):
            print(f"  (the app, pid {pid}, still runs: {Path(f'/proc/{pid}/stat').read_text().split()[2]}; "
                  f"stack: {_where(pid)})")
            os.kill(pid, signal.SIGKILL)
        self.check(not _alive(pid) and took <= CLOSE_LIMIT_S,
                   f"closing the terminal ended the app in {took:.2f} s (limit {CLOSE_LIMIT_S} s)")
        self.check(not heartbeat.exists(), "the serving heartbeat was removed")
        left = json.loads(hostile.read_text())
        inbox = self.root / "sessions" / encode_session_id(self.session)
        self.check(left["response"] is None and Path(left["request"]).exists()
                   and not (inbox / "responses" / f"{left['id']}.json").exists(),
                   "the hidden-character ask stays in the inbox, unanswered, for the next authorizer")


    def grant_and_revoke(self) -> None:
        """A whole-session grant decides the next ask by itself; after its revoke the person decides again."""
        granter = self.simulated("Granter", "npm:npm run lint")
        self.wait_screen(r"2 pending")
        self.keys("G")
        time.sleep(GRACE_S)
        self.keys("w")
        confirm = self.wait_screen(r"Approve for the WHOLE serving session")
        self.show("the whole-session confirmation", confirm)
        time.sleep(GRACE_S)
        self.keys("y")
        got = self.received(granter)
        self.check(got is not None and got.get("state") == "approved"
                   and got.get("decidedBy") == {"kind": "user", "via": "dialog"},
                   f"the child whose ask made the grant received approved, by the user: {got}")
        follower = self.simulated("Follower", "npm:npm run test")
        got = self.received(follower)
        self.check(got is not None and got.get("state") == "approved"
                   and (got.get("decidedBy") or {}).get("kind") == "session_approval",
                   f"the next matching ask was approved by the grant, no key pressed: {got}")

        self.keys("W")
        grants = self.wait_screen(r"npm run \*")
        self.show("the grants screen", grants)
        self.keys("x")
        self.wait_screen(r"again to revoke")
        self.keys("x")
        revoked = self.wait_screen(r"Revoked:")
        self.show("after the revoke", revoked)
        self.keys("Escape")
        after = self.simulated("After", "npm:npm run docs")
        queue = self.wait_screen(r"2 pending")
        self.check(json.loads(after.read_text())["response"] is None,
                   "after the revoke the next matching ask waits for the person")

        self.keys("G")
        time.sleep(GRACE_S)
        self.keys("Space", "N")
        preview = self.wait_screen(r"these 1 ask\?|this ask\?")
        self.keys("r")
        self.wait_screen(r"typing the reason")
        self.type(REASON)
        self.keys("Enter")
        self.wait_screen(r"press\s+y\s+again|deny all 1")
        time.sleep(GRACE_S)
        self.keys("y")
        self.wait_screen(r"press\s+y\s+again")
        preview = self.screen()
        self.show("the batch denial, reason typed, armed", preview)
        self.keys("y")
        got = self.received(after)
        self.check(got is not None and got.get("state") == "denied_with_reason"
                   and got.get("denialReason") == REASON,
                   f"the denied child received the typed reason: {got}")
        self.show("the queue after the denial", self.wait_screen(r"1 pending"))
        del queue


    def first_day(self) -> None:
        """The rough edges a newcomer hit on the first day (issue 35), walked again: the keys a 20.7.3
        ask is offered, a filter hiding every ask, `PgDn` `h` `esc` then a decision, help's `End`."""
        old = self.simulated("Oldtimer", "legacy")
        self.wait_screen(r"2 pending")
        self.keys("G")
        seen = self.wait_screen(r"NO CHILD-FIXED FACTS")
        deadline = time.monotonic() + WAIT_S
        while "R Rule" in seen and time.monotonic() < deadline:  # the footer follows the selection
            time.sleep(0.1)
            seen = self.screen()
        bar = "\n".join([line for line in seen.splitlines() if line.strip()][-3:])
        self.show("a 20.7.3 ask's keys", bar)
        self.check(" w " not in bar and "R Rule" not in bar and " y " in bar,
                   "a 20.7.3 ask is not offered w or R (they can never act on it)")
        self.keys("/")
        self.wait_screen(r"filter: agent:NAME")
        self.type("zzz-none")
        self.keys("Enter")
        try:
            self.wait_screen(r"2 pending, none match the filter", within=10)
            self.check(True, "a filter hiding every ask says so, not 'No pending asks'")
        except TimeoutError:
            self.check(False, "a filter hiding every ask says so, not 'No pending asks'")
        self.keys("Escape")
        self.wait_screen(r"Ask 1/2")
        self.keys("G")  # the filter cleared, the cursor is on the first ask: the 20.7.3 one is last
        self.wait_screen(r"NO CHILD-FIXED FACTS")
        self.keys("PageDown", "PageDown", "PageDown", "h")
        self.wait_screen(r"this run's decisions|asks ·")
        self.keys("Escape")
        self.wait_screen(r"Ask 2/2")
        time.sleep(GRACE_S)
        self.keys("y")
        self.wait_screen(r"Press\s+y\s+again")  # the queue's status line
        self.keys("y")
        got = self.received(old)
        self.check(got is not None and got.get("state") == "approved",
                   f"after PgDn, h, esc the keys count: the 20.7.3 child received {got}")
        self.keys("?")
        self.wait_screen(r"Keys")
        self.keys("End")
        try:
            self.wait_screen(r"esc / \? : close", within=5)
            self.check(True, "End reaches the end of help on one press")
        except TimeoutError:
            self.check(False, "End reaches the end of help on one press")
        self.keys("Escape")
        self.wait_screen(r"1 pending")


def _where(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return "?"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not yet reaped by the closing tmux server) has ended too.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return run_child(*sys.argv[2:8])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", action="append",
                        help="WxH (repeatable; default 80x24, 120x40 and 200x50)")
    parser.add_argument("--no-node", action="store_true", help="leave out the real 20.7.3 child")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is not installed", file=sys.stderr)
        return 2
    failures = 0
    for size in args.size or ["80x24", "120x40", "200x50"]:
        width, height = (int(n) for n in size.split("x"))
        base = Path(tempfile.mkdtemp(prefix=f"pi-authorizer-walk-{size}-"))
        try:
            failures += Walk((width, height), base, not args.no_node).run()
        finally:
            if not args.keep:
                shutil.rmtree(base, ignore_errors=True)
    print("all checks passed" if not failures else f"{failures} check(s) failed")
    return failures


if __name__ == "__main__":
    raise SystemExit(main())
