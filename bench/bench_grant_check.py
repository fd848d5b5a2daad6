"""A whole-session grant's deny check with many agent files, while serving goes on (issue 21 finding 6).

Run with `uv run python -m bench.bench_grant_check [AGENT_FILES]` (default 10,000). A real serving core
(real config, `git *` allowed) serves one session; the agents folder holds AGENT_FILES agent files
(one of them denies `npm run *`). A person asks for a whole-session grant of `npm run *`: the check
(`Person.check_serving_grant`, off the event loop) composes one policy per agent file. While
it runs, control asks (`git status`, allowed by rule) are written one after another and their
round trip timed (`--on-loop`: the check run on the event loop, as before the fix).
Reported: the first check's time, control asks answered meanwhile and their p50 /
max round trip, and a second check (remembered by the rules until a file changes).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from core.judging.recorded import RecordedAuthority
from core.person import Person
from core.rules import PolicyStore
from core.serving import ServingCore
from tests.helpers import response_path, write_request

S = "bench-session"


def intent(value: str) -> dict[str, object]:
    return {"surface": "bash", "matchValues": [value], "boundaryValue": None, "requesterCwd": "/w",
            "principal": {"sessionId": "child", "agentName": "Explore"}}


async def main(count: int, on_loop: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        agent_dir = base / "agent"
        config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"permission": {"bash": {"git *": "allow"}}}))
        agents = agent_dir / "agents"
        agents.mkdir()
        for n in range(count - 1):
            (agents / f"agent{n}.md").write_text(f"---\nname: agent{n}\n---\n")
        careful = '---\nname: careful\npermission:\n  bash:\n    "npm run *": deny\n---\n'
        (agents / "careful.md").write_text(careful)
        authority = RecordedAuthority(PolicyStore(agent_dir, base / "project", None, home="/home/me"))
        person = Person(authority)
        root = base / "root"
        core = ServingCore(root, base / "state", person, judge=authority)
        core.add_session(S)
        task = asyncio.create_task(core.run())
        write_request(root, S, "grant", accessIntent=intent("npm run dev"),
                      sessionApproval={"surface": "bash", "patterns": ["npm run *"]})
        while not person.pending():  # noqa: ASYNC110 (polled, as a child polls)
            await asyncio.sleep(0.01)
        key = person.pending()[0].key
        started = time.perf_counter()

        async def blocking() -> str | None:  # the code before: the check ran on the event loop
            await asyncio.sleep(0.05)
            return person.serving_grant_refusal(key)

        check = asyncio.create_task(blocking() if on_loop else person.check_serving_grant(key))
        trips: list[float] = []
        n = 0
        while not check.done():
            name = f"control{n}"
            sent = time.perf_counter()
            write_request(root, S, name, accessIntent=intent("git status"))
            path = response_path(root, S, name)
            while not path.exists() and not (check.done() and time.perf_counter() - sent > 5):  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            trips.append(time.perf_counter() - sent)
            n += 1
        refusal = await check
        first = time.perf_counter() - started
        again = time.perf_counter()
        await person.check_serving_grant(key)
        second = time.perf_counter() - again
        core.stop()
        await task
    print(f"agent files: {count:,}{' (check on the event loop, as before)' if on_loop else ''}")
    print(f"first check: {first:.2f} s -> {refusal}")
    print(f"second check (remembered): {second * 1000:.1f} ms")
    print(f"control asks answered during the first check: {len(trips)}")
    if trips:
        p50, worst = statistics.median(trips) * 1000, max(trips) * 1000
        print(f"control round trip p50 {p50:.1f} ms, max {worst:.1f} ms")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--on-loop"]
    asyncio.run(main(int(args[0]) if args else 10_000, "--on-loop" in sys.argv))
