"""Resolution throughput: a 500-rule config and 10,000 varied requests, on one core.

Run with `uv run python -m bench.bench_resolution`. Measures `resolve_with_policy` (the rules alone;
the explanation trail is built lazily and is timed separately) and `RecordedAuthority.judge` on
parsed request files (what serving pays per ask, `decidedBy` included), with and without reading
the explanation the app shows.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

from core.judging.recorded import RecordedAuthority
from core.rules import AskingUnit, IntentFacts, PolicyStore, resolve_with_policy
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest

RULES = 500
REQUESTS = 10_000
TOOLS = ("git", "npm", "cargo", "make", "docker", "kubectl", "python", "rm", "ls", "cat")


def build_config(rng: random.Random) -> dict[str, object]:
    """500 rules spread over bash, path, external_directory, mcp, skill and tool surfaces."""
    bash = {"*": "ask"} | {f"{rng.choice(TOOLS)} sub{i} *": rng.choice(["allow", "deny", "ask"])
                           for i in range(199)}
    path = {"*": "ask"} | {f"/repo/mod{i}/*": rng.choice(["allow", "deny"]) for i in range(99)}
    path_write = {f"src/mod{i}/*.lock": "deny" for i in range(50)}
    external = {"*": "ask"} | {f"~/cache{i}/*": "allow" for i in range(49)}
    mcp = {f"server{i}:*": rng.choice(["allow", "deny"]) for i in range(50)}
    skill = {f"skill-{i}": "allow" for i in range(25)} | {f"danger-{i}*": "deny" for i in range(25)}
    config = {"bash": bash, "path": path, "path_write": path_write,
              "external_directory": external, "mcp": mcp, "skill": skill}
    assert sum(len(v) for v in config.values()) == RULES
    return {"permission": config}


def build_requests(rng: random.Random) -> list[IntentFacts]:
    """A varied mix: bash commands and chains, path alias sets, externals, MCP, skills."""
    requests: list[IntentFacts] = []
    for _ in range(REQUESTS):
        kind = rng.randrange(6)
        n = rng.randrange(250)
        if kind == 0:
            command = f"{rng.choice(TOOLS)} sub{n} --flag {n}"
            requests.append(IntentFacts("bash", (command,)))
        elif kind == 1:
            units = tuple(AskingUnit(f"{rng.choice(TOOLS)} sub{rng.randrange(250)}")
                          for _ in range(3))
            requests.append(IntentFacts("bash", (" && ".join(u.command for u in units),),
                                        asking_units=units))
        elif kind == 2:
            rel = f"src/mod{n}/file{n}.lock"
            surface = rng.choice(["path", "path_read", "path_write"])
            requests.append(IntentFacts(surface, (f"/repo/{rel}", rel, f"/real/repo/{rel}"),
                                        f"/real/repo/{rel}"))
        elif kind == 3:
            # The child sends every alias; values are matched as sent (never home-expanded).
            requests.append(IntentFacts("external_directory_read", (
                f"~/cache{n}/pkg/x.rs", str(Path.home() / f"cache{n}" / "pkg" / "x.rs"))))
        elif kind == 4:
            requests.append(IntentFacts("mcp", (f"server{n}:search", f"server{n}", "mcp_call")))
        else:
            requests.append(IntentFacts("skill", (rng.choice(["skill-", "danger-x"]) + str(n),)))
    return requests


def as_request(index: int, facts: IntentFacts) -> ParsedRequest:
    """The same facts as a forwarded request file, parsed as serving parses it."""
    units = [{"command": u.command} for u in facts.asking_units] if facts.asking_units else None
    intent = {"surface": facts.surface, "matchValues": list(facts.match_values),
              "boundaryValue": facts.boundary_value, "requesterCwd": "/repo",
              "principal": {"sessionId": "child", "agentName": "Explore"}, "askingUnits": units}
    body = {"id": f"r{index}", "createdAt": 1, "requesterSessionId": "child",
            "requesterAgentName": "Explore", "targetSessionId": "s", "message": "m",
            "accessIntent": intent}
    return parse_request(json.dumps(body).encode())


def time_judge(authority: RecordedAuthority, parsed: list[ParsedRequest], *, explain: bool) -> float:
    """Seconds per `judge` call (optionally reading the explanation, as the app does)."""
    start = time.perf_counter()
    for request in parsed:
        judgment = authority.judge(request, "s")
        if explain:
            _ = list(judgment.explanation)
    return (time.perf_counter() - start) / len(parsed)


def main() -> None:
    """Print resolutions per second (and the trail's cost, for reference)."""
    rng = random.Random(7)  # noqa: S311 - a reproducible workload, not a secret
    with tempfile.TemporaryDirectory() as tmp:
        agent_dir = Path(tmp) / "agent"
        config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps(build_config(rng)))
        store = PolicyStore(agent_dir, Path(tmp) / "project")
        requests = build_requests(rng)
        verdicts = {"allow": 0, "deny": 0, "ask": 0}
        start = time.perf_counter()
        for facts in requests:
            verdicts[resolve_with_policy(store.policy("Explore"), facts).verdict] += 1
        elapsed = time.perf_counter() - start
        sample = requests[:500]
        trail_start = time.perf_counter()
        for facts in sample:
            _ = resolve_with_policy(store.policy("Explore"), facts).trail
        trail_elapsed = time.perf_counter() - trail_start
        authority = RecordedAuthority(store)
        parsed = [as_request(i, facts) for i, facts in enumerate(requests[:2_000])]
        judge_s = time_judge(authority, parsed, explain=False)
        explained_s = time_judge(authority, parsed, explain=True)
    print(f"{RULES} rules, {REQUESTS} requests: {REQUESTS / elapsed:,.0f} resolutions/s "
          f"({elapsed * 1e6 / REQUESTS:.1f} us each; first call includes loading)")
    print(f"verdicts: {verdicts}")
    print(f"with the explanation trail: {len(sample) / trail_elapsed:,.0f} resolutions/s")
    print(f"serving judge (RecordedAuthority.judge, 2,000 asks): {judge_s * 1e3:.3f} ms/ask; "
          f"reading the explanation too: {explained_s * 1e3:.3f} ms/ask")


if __name__ == "__main__":
    main()
