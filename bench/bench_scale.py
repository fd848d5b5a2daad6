"""Scale of this node's rules: a 5,000-rule config, and 3,000 distinct agent names.

Run with `uv run python -m bench.bench_scale`. Each scenario runs in its own process, so its peak
RSS (`ru_maxrss`) is its own; latency is `RecordedAuthority.judge` per ask (what serving pays),
p50 and p99, after the first (loading) call.

- `rules-5000`: a 5,000-rule config (bash, path, mcp), 5,000 varied asks, one agent.
- `names-3000`: a 500-rule config and 3,000 agent names without agent files, each asking 3 times.
- `agent-files-600`: 600 names, each with an agent file (20 rules), each asking 3 times in a row:
  each name composes its own policy (about 25 ms for 500 rules), so the policy cache's bound
  (`MAX_CACHED_POLICIES`) is what keeps memory flat.
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.judging.recorded import RecordedAuthority
from core.rules import PolicyStore
from core.wire.reader import parse_request
from core.wire.request import ParsedRequest

SCENARIOS = ("rules-5000", "names-3000", "agent-files-600")
TOOLS = ("git", "npm", "cargo", "make", "docker", "kubectl", "python", "rm", "ls", "cat")


def config(rng: random.Random, rules: int) -> dict[str, object]:
    bash_n, path_n = rules * 2 // 5, rules * 2 // 5
    mcp_n = rules - bash_n - path_n
    bash = {"*": "ask"} | {f"{rng.choice(TOOLS)} sub{i} *": rng.choice(["allow", "deny", "ask"])
                           for i in range(bash_n - 1)}
    path = {"*": "ask"} | {f"/repo/mod{i}/*": rng.choice(["allow", "deny"]) for i in range(path_n - 1)}
    mcp = {f"server{i}:*": rng.choice(["allow", "deny"]) for i in range(mcp_n)}
    return {"permission": {"bash": bash, "path": path, "mcp": mcp}}


def request(index: int, agent: str, rng: random.Random, spread: int) -> ParsedRequest:
    n = rng.randrange(spread)
    kind = index % 3
    if kind == 0:
        surface, values = "bash", [f"{rng.choice(TOOLS)} sub{n} --flag"]
    elif kind == 1:
        surface, values = "path_read", [f"/repo/mod{n}/file.txt", f"mod{n}/file.txt"]
    else:
        surface, values = "mcp", [f"server{n}:search", f"server{n}"]
    intent = {"surface": surface, "matchValues": values, "boundaryValue": None, "requesterCwd": "/repo",
              "principal": {"sessionId": "child", "agentName": agent}}
    body = {"id": f"r{index}", "createdAt": 1, "requesterSessionId": "child", "requesterAgentName": agent,
            "targetSessionId": "s", "message": "m", "accessIntent": intent}
    return parse_request(json.dumps(body).encode())


def run(scenario: str) -> dict[str, object]:
    rng = random.Random(11)  # noqa: S311 - a reproducible workload, not a secret
    rules = 5_000 if scenario == "rules-5000" else 500
    with tempfile.TemporaryDirectory() as tmp:
        agent_dir = Path(tmp) / "agent"
        path = agent_dir / "extensions" / "pi-permission-system" / "config.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(config(rng, rules)))
        count = {"rules-5000": 1, "names-3000": 3_000, "agent-files-600": 600}[scenario]
        names = [f"agent-{i}" for i in range(count)]
        if scenario == "agent-files-600":
            (agent_dir / "agents").mkdir()
            for name in names:
                body = "".join(f'    "{rng.choice(TOOLS)} x{j} *": deny\n' for j in range(20))
                (agent_dir / "agents" / f"{name}.md").write_text(f"---\npermission:\n  bash:\n{body}---\n")
        start = time.perf_counter()
        store = PolicyStore(agent_dir, Path(tmp) / "project")
        authority = RecordedAuthority(store)
        authority.judge(request(0, names[0], rng, rules // 2), "s")
        load_ms = (time.perf_counter() - start) * 1e3
        asks = [request(i, names[i // 3 % len(names)], rng, rules // 2)
                for i in range(5_000 if scenario == "rules-5000" else 3 * len(names))]
        latencies = []
        for parsed in asks:
            begin = time.perf_counter()
            authority.judge(parsed, "s")
            latencies.append((time.perf_counter() - begin) * 1e3)
        cached = store.cached_policies() if hasattr(store, "cached_policies") else len(store._policies)
    latencies.sort()
    return {
        "scenario": scenario,
        "asks": len(asks),
        "load_ms": round(load_ms, 1),
        "p50_ms": round(statistics.median(latencies), 3),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)], 3),
        "cached_policies": cached,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--scenario":
        print(json.dumps(run(sys.argv[2])))
        return
    print(f"{'scenario':<18} {'asks':>6} {'load ms':>8} {'p50 ms':>7} {'p99 ms':>7} {'policies':>8} "
          f"{'peak RSS MB':>11}")
    for scenario in SCENARIOS:
        out = subprocess.run([sys.executable, "-m", "bench.bench_scale", "--scenario", scenario],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        print(f"{r['scenario']:<18} {r['asks']:>6} {r['load_ms']:>8} {r['p50_ms']:>7} {r['p99_ms']:>7} "
              f"{r['cached_policies']:>8} {r['peak_rss_mb']:>11}")


if __name__ == "__main__":
    main()
